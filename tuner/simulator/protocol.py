"""SGLang 0.5.23's request bodies and response objects, without any HTTP: parse, validate, render.

Parsing turns an OpenAI or native body into a ``ParsedRequest`` (or raises ``BadRequest`` with
SGLang's message); rendering turns the engine's chunks into the JSON objects SGLang sends. The
server (``server.py``) only moves them over HTTP.
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from typing import Any

from tuner.simulator import text
from tuner.simulator.engine import Chunk, GenerationRequest, SpecStats

#: SGLang's /generate default (sampling_params.py) and the OpenAI completions default (protocol.py).
NATIVE_DEFAULT_MAX_NEW_TOKENS = 128
COMPLETIONS_DEFAULT_MAX_TOKENS = 16


class BadRequest(Exception):
    """A request SGLang answers with HTTP 400."""


@dataclass(frozen=True)
class StreamOptions:
    include_usage: bool = False
    continuous_usage_stats: bool = False


@dataclass(frozen=True)
class ParsedRequest:
    api: str  # "chat" | "completions" | "generate"
    generation: GenerationRequest
    stream: bool
    model: str | None
    stream_options: StreamOptions
    spec_details: bool  # return_spec_tokens_details
    rid: str


def error_body(message: str, *, status: int = 400, kind: str = "BadRequestError") -> dict[str, Any]:
    """The OpenAI-style error object of SGLang's ``create_error_response``."""
    return {"object": "error", "message": message, "type": kind, "param": None, "code": status}


def load_json(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise BadRequest(f"JSON decode error: {exc}") from None
    if not isinstance(body, dict):
        raise BadRequest("Input should be a valid dictionary")
    return body


def _number(body: dict[str, Any], key: str, default: float) -> float:
    value = body.get(key)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BadRequest(f"{key}: Input should be a valid number")
    return float(value)


def _integer(body: dict[str, Any], key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"{key}: Input should be a valid integer")
    return value


def _check_sampling(max_new_tokens: int, temperature: float) -> None:
    # sampling_params.py::verify
    if temperature < 0.0:
        raise BadRequest(f"temperature must be non-negative, got {temperature}.")
    if max_new_tokens < 0:
        raise BadRequest(f"max_new_tokens must be at least 0, got {max_new_tokens}.")


def _check_context(prompt_tokens: int, max_tokens: int, context_length: int) -> None:
    # serving_base / tokenizer_manager: the request must fit the context window.
    if prompt_tokens >= context_length:
        raise BadRequest(
            f"The input ({prompt_tokens} tokens) is longer than the model's context length "
            f"({context_length} tokens).")
    if prompt_tokens + max_tokens > context_length:
        raise BadRequest(
            f"Requested token count exceeds the model's maximum context length of {context_length} "
            f"tokens. You requested a total of {prompt_tokens + max_tokens} tokens: "
            f"{prompt_tokens} tokens from the input messages and {max_tokens} tokens for the "
            "completion. Please reduce the number of tokens in the input messages or the "
            "completion to fit within the limit.")


def parse_openai(api: str, body: dict[str, Any], context_length: int) -> ParsedRequest:
    if api == "chat":
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict)
                                                                     for m in messages):
            raise BadRequest("messages: Field required" if messages is None
                             else "messages: Input should be a "
                             "non-empty list of messages")
        prompt = text.prompt_of_messages(messages)
    else:
        raw = body.get("prompt")
        if isinstance(raw, list) and len(raw) == 1 and isinstance(raw[0], str):
            raw = raw[0]
        if isinstance(raw, list) and raw and all(isinstance(t, int) for t in raw):
            raw = " ".join(map(str, raw))
        if not isinstance(raw, str):
            raise BadRequest("prompt: Field required" if raw is None
                             else "prompt: Input should be a string")
        prompt = raw
    prompt_tokens = text.count_prompt_tokens(prompt)
    max_tokens = _integer(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _integer(body, "max_tokens")
    if max_tokens is None:
        max_tokens = (COMPLETIONS_DEFAULT_MAX_TOKENS if api == "completions"
                      else context_length - prompt_tokens)
    temperature = _number(body, "temperature", 1.0)
    _check_sampling(max_tokens, temperature)
    _check_context(prompt_tokens, max_tokens, context_length)
    n = _integer(body, "n")
    if n is not None and n != 1:
        raise BadRequest(
            "Parallel sampling is not supported for this simulated server (n must be 1).")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict):
        raise BadRequest("stream_options: Input should be a valid dictionary")
    model = body.get("model")
    return ParsedRequest(
        api=api,
        generation=GenerationRequest(prompt=prompt, max_new_tokens=max_tokens,
                                     temperature=temperature,
                                     ignore_eos=bool(body.get("ignore_eos", False)),
                                     prompt_tokens=prompt_tokens),
        stream=bool(body.get("stream", False)),
        model=model if isinstance(model, str) else None,
        stream_options=StreamOptions(bool(options.get("include_usage")),
                                     bool(options.get("continuous_usage_stats"))),
        spec_details=bool(body.get("return_spec_tokens_details", False)),
        rid=_request_id(body),
    )


def parse_generate(body: dict[str, Any], context_length: int) -> ParsedRequest:
    raw_text, ids = body.get("text"), body.get("input_ids")
    if isinstance(raw_text, str):
        prompt, prompt_tokens = raw_text, text.count_prompt_tokens(raw_text)
    elif isinstance(ids, list) and ids and all(isinstance(t, int) for t in ids):
        prompt, prompt_tokens = " ".join(map(str, ids)), len(ids)
    else:
        raise BadRequest("Either text, input_ids or input_embeds should be provided.")
    params = body.get("sampling_params") or {}
    if not isinstance(params, dict):
        raise BadRequest("sampling_params should be a dictionary")
    max_new = _integer(params, "max_new_tokens")
    max_new = NATIVE_DEFAULT_MAX_NEW_TOKENS if max_new is None else max_new
    temperature = _number(params, "temperature", 1.0)
    _check_sampling(max_new, temperature)
    _check_context(prompt_tokens, max_new, context_length)
    return ParsedRequest(
        api="generate",
        generation=GenerationRequest(prompt=prompt, max_new_tokens=max_new, temperature=temperature,
                                     ignore_eos=bool(params.get("ignore_eos", False)),
                                     prompt_tokens=prompt_tokens),
        stream=bool(body.get("stream", False)),
        model=None,
        stream_options=StreamOptions(),
        spec_details=False,
        rid=_request_id(body),
    )


# ----- rendering ----------------------------------------------------------------------------------
def usage(prompt_tokens: int, completion_tokens: int) -> dict[str, Any]:
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens, "prompt_tokens_details": None,
            "reasoning_tokens": 0}


def spec_details(stats: SpecStats) -> dict[str, Any]:
    return {"spec_accept_length": stats.accept_length, "spec_accept_rate": stats.accept_rate,
            "spec_num_correct_drafts": stats.num_correct_drafts,
            "spec_num_proposed_drafts": stats.num_proposed_drafts,
            "spec_verify_ct": stats.verify_ct,
            "spec_correct_drafts_histogram": list(stats.histogram)}


@dataclass(frozen=True)
class OpenAIRenderer:
    """Chunks and whole responses of one OpenAI request (chat or completions)."""

    api: str
    rid: str
    model: str
    prompt_tokens: int
    created: int

    @classmethod
    def for_request(cls, parsed: ParsedRequest, model: str) -> OpenAIRenderer:
        rid = parsed.rid if parsed.api == "chat" else f"cmpl-{parsed.rid}"
        return cls(parsed.api, rid, model, parsed.generation.input_tokens, int(time.time()))

    @property
    def chunk_object(self) -> str:
        return "chat.completion.chunk" if self.api == "chat" else "text_completion"

    def _envelope(self, choices: list[dict[str, Any]],
                  usage_: dict[str, Any] | None) -> dict[str, Any]:
        return {"id": self.rid, "object": self.chunk_object, "created": self.created,
                "model": self.model, "choices": choices, "usage": usage_}

    def _choice(self, content: str, finish: str | None, *, role: bool = False) -> dict[str, Any]:
        if self.api == "chat":
            delta: dict[str, Any] = {"role": "assistant",
                                     "content": content} if role else {"content": content}
            delta.update(reasoning_content=None, tool_calls=None)
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish,
                    "matched_stop": None}
        return {"index": 0, "text": content, "logprobs": None, "finish_reason": finish,
                "matched_stop": None}

    def role_chunk(self, continuous: bool, first: Chunk | None = None,
                   arrival_s: float | None = None) -> dict[str, Any]:
        """Chat only: the first chunk, with the assistant role and no content (sent with the
        ``first`` one)."""
        out = self._envelope([self._choice("", None, role=True)], usage(self.prompt_tokens, 0)
                             if continuous else None)
        if first is not None:
            out[SCHEDULE_KEY] = schedule_stamp(arrival_s, first)
        return out

    def chunk(self, chunk: Chunk, continuous: bool,
              arrival_s: float | None = None) -> dict[str, Any]:
        out = self._envelope([self._choice(chunk.text, chunk.finish_reason)],
                             usage(self.prompt_tokens, chunk.completion_tokens) if continuous
                             else None)
        out[SCHEDULE_KEY] = schedule_stamp(arrival_s, chunk)
        return out

    def usage_chunk(self, completion_tokens: int) -> dict[str, Any]:
        return self._envelope([], usage(self.prompt_tokens, completion_tokens))

    def spec_chunk(self, stats: SpecStats) -> dict[str, Any]:
        return {**self._envelope([], None), "sglext": {"spec_tokens_details": spec_details(stats)}}

    def response(self, content: str, finish: str | None, stats: SpecStats | None,
                 with_details: bool) -> dict[str, Any]:
        completion = stats.completion_tokens if stats else 0
        if self.api == "chat":
            choice: dict[str, Any] = {"index": 0,
                                      "message": {"role": "assistant", "content": content,
                                                  "reasoning_content": None,
                                                  "tool_calls": None},
                                      "logprobs": None, "finish_reason": finish,
                                      "matched_stop": None}
        else:
            choice = {"index": 0, "text": content, "logprobs": None, "finish_reason": finish,
                      "matched_stop": None}
        out = {"id": self.rid, "object": "chat.completion" if self.api == "chat"
               else "text_completion",
               "created": self.created, "model": self.model, "choices": [choice],
               "usage": usage(self.prompt_tokens, completion)}
        if with_details and stats is not None:
            out["sglext"] = {"spec_tokens_details": spec_details(stats)}
        return out


#: Not SGLang's: the key of every token-bearing event the simulator sends, ``[arrival, at]`` — the
#: request's arrival and the chunk's scheduled time on the engine's timeline (seconds, at the
#: model's pace divided by the time scale; ``clock.Clock``). A load generator that finds it can
#: measure the schedule instead of the host (objectives/phase.py); any other client ignores an
#: unknown key.
SCHEDULE_KEY = "simulator_schedule"


def schedule_stamp(arrival_s: float | None, chunk: Chunk) -> list[float]:
    return [round(arrival_s or 0.0, 6), round(chunk.at_s, 6)]


def output_ids(words: str) -> list[int]:
    """Stable fake token ids for generated words (one per word)."""
    return [100 + text.stable_hash("id", w) % 150000 for w in words.split()]


def native_event(rid: str, prompt_tokens: int, cumulative_text: str, ids: list[int], chunk: Chunk,
                 draft_tokens: int, started: float, stats: SpecStats | None,
                 arrival_s: float | None = None) -> dict[str, Any]:
    """One /generate event: cumulative text and ids, meta_info with the request's counts so far."""
    finish: dict[str, Any] | None = None
    if chunk.finish_reason == "length":
        finish = {"type": "length", "length": chunk.completion_tokens}
    elif chunk.finish_reason == "stop":
        finish = {"type": "stop", "matched": 151645}
    verify = chunk.verify_ct
    meta: dict[str, Any] = {
        "id": rid, "finish_reason": finish, "prompt_tokens": prompt_tokens,
        "completion_tokens": chunk.completion_tokens, "cached_tokens": 0, "num_retractions": 0,
        "spec_verify_ct": verify,
        "spec_accept_length": chunk.completion_tokens / verify if verify else 1.0,
        "spec_accept_rate": chunk.correct_drafts / (verify * (draft_tokens - 1)) if verify
        and draft_tokens > 1
        else 0.0,
        "spec_num_correct_drafts": chunk.correct_drafts,
        "e2e_latency": time.monotonic() - started,
    }
    if stats is not None:
        meta["spec_correct_drafts_histogram"] = list(stats.histogram)
    return {"text": cumulative_text, "output_ids": ids, "meta_info": meta,
            SCHEDULE_KEY: schedule_stamp(arrival_s, chunk)}


def _request_id(body: dict[str, Any]) -> str:
    """The client's ``rid`` when it sent one as a string, else a fresh one (as SGLang does)."""
    rid = body.get("rid")
    return rid if isinstance(rid, str) else uuid.uuid4().hex
