"""The three ways to ask SGLang for a token stream, and how to read token counts out of each one's
events.

Each API is a path, a request body, and an ``extract`` function that turns one decoded SSE event
into ``(cumulative completion tokens or None, characters of new text, finish reason, prompt
tokens)``. The counts come from the server: ``usage`` on every chunk for the OpenAI APIs (we ask for
``continuous_usage_stats``), ``meta_info.completion_tokens`` on every event of the native
``/generate``. ``extract`` runs once per event, so it does dictionary look-ups and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from objectives.prompts import Prompt
from objectives.spec import Api, WorkloadSpec

#: (cumulative completion tokens | None, new characters, finish reason | None, prompt tokens | None)
Extracted = tuple[int | None, int, str | None, int | None]


@dataclass(frozen=True)
class ApiFormat:
    name: Api
    path: str
    build: Callable[[Prompt, WorkloadSpec, str | None], dict[str, Any]]
    extract: Callable[[dict[str, Any]], Extracted]

    def body(self, prompt: Prompt, workload: WorkloadSpec, model: str | None,
             index: int | None = None) -> bytes:
        """The request body; with ``index`` (the request's number in its phase's sequence), an
        OpenAI request sampling at a temperature above 0 carries the seed
        ``request_seed(workload.seed, index)``, so request i of every trial is the same prompt
        sampled with the same seed (objectives/paired.py). Every release of SGLang's OpenAI API
        takes ``seed``; its native ``/generate`` only from 0.5 on (``sampling_seed``), so there none
        is sent."""
        body = self.build(prompt, workload, model)
        if index is not None and workload.temperature > 0 and self.name != "generate":
            body["seed"] = request_seed(workload.seed, index)
        return json.dumps(body).encode()


def request_seed(seed: int, index: int) -> int:
    """The sampling seed of request ``index`` of a workload seeded ``seed``: the same in every
    trial."""
    return (seed * 1_000_003 + index) % 2**31


# Every OpenAI chunk then carries the cumulative completion-token count, which makes each chunk's
# token count exact (SGLang and vLLM both honour continuous_usage_stats). A server that ignores it
# still sends the final usage chunk, and the total is then spread over the chunks by text length.
_STREAM_OPTIONS = {"include_usage": True, "continuous_usage_stats": True}


def _openai_common(workload: WorkloadSpec, model: str | None) -> dict[str, Any]:
    body: dict[str, Any] = {
        "max_tokens": workload.max_tokens,
        "temperature": workload.temperature,
        "stream": True,
        "stream_options": _STREAM_OPTIONS,
    }
    if model is not None:
        body["model"] = model
    # an SGLang extension: only sent when asked for, so other servers accept the body
    if workload.ignore_eos:
        body["ignore_eos"] = True
    return body


def _chat_body(prompt: Prompt, workload: WorkloadSpec, model: str | None) -> dict[str, Any]:
    body = _openai_common(workload, model)
    body["messages"] = [{"role": role, "content": content} for role, content in prompt.messages]
    return body


def _completions_body(prompt: Prompt, workload: WorkloadSpec, model: str | None) -> dict[str, Any]:
    body = _openai_common(workload, model)
    body["prompt"] = prompt.text
    return body


def _generate_body(prompt: Prompt, workload: WorkloadSpec, model: str | None) -> dict[str, Any]:
    return {
        "text": prompt.text,
        "sampling_params": {
            "max_new_tokens": workload.max_tokens,
            "temperature": workload.temperature,
            "ignore_eos": workload.ignore_eos,
        },
        "stream": True,
    }


def _usage(obj: dict[str, Any]) -> tuple[int | None, int | None]:
    usage = obj.get("usage")
    if not usage:
        return None, None
    return usage.get("completion_tokens"), usage.get("prompt_tokens")


def _extract_chat(obj: dict[str, Any]) -> Extracted:
    completion, prompt = _usage(obj)
    choices = obj.get("choices")
    if not choices:  # the final usage-only chunk
        return completion, 0, None, prompt
    choice = choices[0]
    delta = choice.get("delta") or {}
    # Reasoning models stream their thinking separately; those are output tokens all the same.
    chars = len(delta.get("content") or "") + len(delta.get("reasoning_content") or "")
    return completion, chars, choice.get("finish_reason"), prompt


def _extract_completions(obj: dict[str, Any]) -> Extracted:
    completion, prompt = _usage(obj)
    choices = obj.get("choices")
    if not choices:
        return completion, 0, None, prompt
    choice = choices[0]
    return completion, len(choice.get("text") or ""), choice.get("finish_reason"), prompt


def _extract_generate(obj: dict[str, Any]) -> Extracted:
    # text and output_ids are cumulative unless the server streams incrementally, but
    # completion_tokens is always cumulative: it is the one field to trust. Without it there is no
    # fallback (chars stay 0).
    meta = obj.get("meta_info") or {}
    finish = meta.get("finish_reason")
    if isinstance(finish, dict):
        finish = finish.get("type")
    return meta.get("completion_tokens"), 0, finish, meta.get("prompt_tokens")


APIS: dict[str, ApiFormat] = {
    "chat": ApiFormat("chat", "/v1/chat/completions", _chat_body, _extract_chat),
    "completions": ApiFormat("completions", "/v1/completions", _completions_body,
                             _extract_completions),
    "generate": ApiFormat("generate", "/generate", _generate_body, _extract_generate),
}
