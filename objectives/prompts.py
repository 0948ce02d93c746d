"""Where prompts come from: the built-in set, synthetic prompts of a fixed length, or a JSONL file.

A source hands out the prompt of request ``i``; the order is shuffled by the workload's seed and
repeats once the set is exhausted. Token counts are never computed here: the server reports them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from objectives.spec import WorkloadSpec
from tuner.core.errors import SpectuneError

Message = tuple[str, str]  # (role, content)

#: Package data next to this module (declared in pyproject); a plain path works for wheels and
#: editable installs.
BUILTIN_PROMPTS = Path(__file__).with_name("data") / "prompts.jsonl"


class WorkloadError(SpectuneError):
    """A prompt file is missing or unreadable, or holds no usable prompt. Carries one line per
    problem."""

    exit_code = 2

    def __init__(self, problems: list[str]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True, slots=True)
class Prompt:
    messages: tuple[Message, ...]

    @property
    def text(self) -> str:
        """The prompt for the completions and native APIs, which take text rather than messages.

        A single user message is sent as it is; a conversation becomes a plain transcript. We have
        no tokenizer, so the model's chat template cannot be applied here: use the chat API for
        that.
        """
        if len(self.messages) == 1 and self.messages[0][0] == "user":
            return self.messages[0][1]
        turns = [f"{role.capitalize()}: {content}" for role, content in self.messages]
        return "\n\n".join([*turns, "Assistant:"])


class PromptSource(Protocol):
    def prompt(self, index: int) -> Prompt: ...


class FixedPrompts:
    """A finite prompt set, visited in a seeded shuffled order and repeated as needed."""

    def __init__(self, prompts: list[Prompt], seed: int) -> None:
        if not prompts:
            raise WorkloadError(["the prompt set is empty"])
        self.prompts = prompts
        self._order = list(range(len(prompts)))
        random.Random(seed).shuffle(self._order)

    def __len__(self) -> int:
        return len(self.prompts)

    def prompt(self, index: int) -> Prompt:
        return self.prompts[self._order[index % len(self._order)]]


# Short, frequent English words: each is one token in the vocabularies of current LLMs (with its
# leading space), so N of them make a prompt of about N tokens. The exact count comes back in the
# usage data.
_WORD_TEXT = (
    "the of and to in is was for on that with as by at from it be this are or have an not but "
    "which one all were they we there been has more when will would who so no if out what up about "
    "into than them can only other new some time could these two may then do first any my now such "
    "like our over man me even most made after also did many before must through back years where "
    "much your way well down should because each just those people how too little state good very "
    "make world still own see men work long get here between both life being under never day same "
    "another know while last might us great old year off come since against go came right used "
    "take three"
)
_WORDS = tuple(_WORD_TEXT.split())

_SYNTHETIC_INSTRUCTION = "Continue this sequence of words for as long as you can:"
_INSTRUCTION_TOKENS = 12  # roughly, with the request number; subtracted so the total is close to N


class SyntheticPrompts:
    """Prompt ``i`` is ``input_tokens`` common words drawn with seed (seed, i).

    Every request gets a different prompt, so the server's prefix cache cannot make prefill look
    cheaper than it is for fresh traffic.
    """

    def __init__(self, input_tokens: int, seed: int) -> None:
        self.words = max(1, input_tokens - _INSTRUCTION_TOKENS)
        self.seed = seed

    def prompt(self, index: int) -> Prompt:
        rng = random.Random(f"{self.seed}:{index}")
        body = " ".join(rng.choices(_WORDS, k=self.words))
        return Prompt((("user", f"{index}. {_SYNTHETIC_INSTRUCTION} {body}"),))


def load_source(workload: WorkloadSpec) -> PromptSource:
    if workload.dataset == "synthetic":
        return SyntheticPrompts(workload.input_tokens, workload.seed)
    if workload.dataset == "builtin":
        return FixedPrompts(parse_jsonl(BUILTIN_PROMPTS.read_text(encoding="utf-8"),
                                        "builtin prompts"),
                            workload.seed)
    path = Path(workload.dataset).expanduser()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise WorkloadError([f"cannot read prompt file {path}: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError:
        raise WorkloadError([f"prompt file {path} is not UTF-8 text"]) from None
    return FixedPrompts(parse_jsonl(text, str(path)), workload.seed)


def parse_jsonl(text: str, origin: str) -> list[Prompt]:
    """Prompts from JSONL text; every problem is reported with its line number, all at once."""
    prompts: list[Prompt] = []
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            prompts.append(parse_item(json.loads(line)))
        except json.JSONDecodeError as exc:
            problems.append(f"{origin}:{number}: not JSON ({exc.msg})")
        except ValueError as exc:
            problems.append(f"{origin}:{number}: {exc}")
    if problems:
        raise WorkloadError(problems[:10] + ([f"... and {len(problems) - 10} more"]
                                             if len(problems) > 10 else []))
    if not prompts:
        raise WorkloadError([f"{origin}: no prompts"])
    return prompts


_SHAREGPT_ROLES = {"human": "user", "user": "user", "system": "system"}


def parse_item(item: object) -> Prompt:
    """One JSONL item in any of the three accepted shapes.

    - ``{"prompt": "..."}``: a single user message;
    - ``{"messages": [{"role", "content"}, ...]}``: OpenAI style, sent up to and including the last
      user turn;
    - ``{"conversations": [{"from", "value"}, ...]}``: ShareGPT, sent up to the first human turn (as
      bench_serving does: the recorded answer that follows is what the model is asked to produce).
    """
    if not isinstance(item, dict):
        raise ValueError("expected a JSON object")
    if isinstance(item.get("prompt"), str) and item["prompt"].strip():
        return Prompt((("user", item["prompt"]),))
    if isinstance(item.get("messages"), list):
        messages = [_openai_message(m) for m in item["messages"]]
        last_user = max((i for i, (role, _) in enumerate(messages) if role == "user"), default=None)
        if last_user is None:
            raise ValueError("'messages' has no user message")
        return Prompt(tuple(messages[: last_user + 1]))
    if isinstance(item.get("conversations"), list):
        messages = []
        for turn in item["conversations"]:
            if not isinstance(turn, dict) or not isinstance(turn.get("value"), str):
                raise ValueError("each ShareGPT turn needs 'from' and a string 'value'")
            role = _SHAREGPT_ROLES.get(str(turn.get("from")).lower())
            if role is None:  # the first answer: everything before it is the prompt
                break
            messages.append((role, turn["value"]))
            if role == "user":
                return Prompt(tuple(messages))
        raise ValueError("'conversations' has no human turn")
    raise ValueError(
        "expected a 'prompt' string, a 'messages' list or a ShareGPT 'conversations' list")


def _openai_message(message: object) -> Message:
    if not isinstance(message, dict) or not isinstance(message.get("content"), str):
        raise ValueError("each message needs a 'role' and a string 'content'")
    role = message.get("role")
    if role not in ("system", "user", "assistant", "tool"):
        raise ValueError(f"unknown message role {role!r}")
    return (role, message["content"])
