"""The answer to "should I have just let SGLang choose?": the tuned static winner beside SGLang's
adaptive steps and beside no speculation, each with its interval (docs/study-file.md, ``[study]
compare``).

A trial's kind is read from what it deployed: ``--speculative-adaptive`` is SGLang's adaptive mode,
no ``--speculative-algorithm`` is speculation off, anything else a static configuration (a tuned
tree, NGRAM ...). The best of each kind is compared with the best static one; the difference's
interval combines the two 95 % score intervals conservatively (lowest over highest to highest over
lowest), so it is never narrower than the measurements allow.
"""

from __future__ import annotations

from objectives.confidence import Interval
from tuner.query.ranking import Ranking, TrialView

ADAPTIVE_FLAG = "--speculative-adaptive"
ALGORITHM_FLAG = "--speculative-algorithm"
LABELS = {"adaptive": "SGLang's adaptive steps (--speculative-adaptive)", "off": "speculation off"}


def kind_of(view: TrialView) -> str:
    config = view.record.config
    if config is None:
        return "static"
    if config.get(ADAPTIVE_FLAG):
        return "adaptive"
    return "static" if config.get(ALGORITHM_FLAG) is not None else "off"


def _relative(a: TrialView, b: TrialView) -> str:
    """How much ``a`` scores above ``b``, with the conservative interval."""
    assert a.score is not None and b.score is not None and b.score > 0
    text = f"{(a.score / b.score - 1) * 100:+.1f} %"
    ai, bi = a.interval, b.interval
    if isinstance(ai, Interval) and isinstance(bi, Interval) and bi.low > 0:
        low, high = ai.low / bi.high - 1, ai.high / bi.low - 1
        text += f" [{low * 100:+.1f} %, {high * 100:+.1f} %]"
        if low < 0 < high:
            text += " (the intervals overlap: no significant difference)"
    else:
        text += " (no interval: a single run)"
    return text


def _score(view: TrialView) -> str:
    interval = f" {view.interval.text()}" if view.interval is not None else ""
    return f"trial {view.number}, score {view.score:.3f}{interval}"


def comparison_lines(ranking: Ranking) -> list[str]:
    """Lines for ``best``: the tuned static winner vs SGLang's adaptive steps and vs off (empty when
    the study deployed neither; a line saying why where one cannot be compared)."""
    best: dict[str, TrialView] = {}
    for view in ranking.ranked:  # best first
        best.setdefault(kind_of(view), view)
    others = [k for k in ("adaptive", "off") if k in best]
    missing = _not_comparable(ranking, [k for k in ("adaptive", "off") if k not in best])
    if not others:
        return missing
    # the study's answer (the confirmed winner when confirmed) when it is a static one
    winner = ranking.best
    static = winner if winner is not None and kind_of(winner) == "static" else best.get("static")
    if static is None or static.score is None:
        return [f"{LABELS[k]}: {_score(best[k])}; no static configuration was measured feasible"
                for k in others]
    lines = [
        f"tuned static winner: {_score(static)} (study score; the references are measured once)"]
    for k in others:
        other = best[k]
        if other.score is None or other.score <= 0:
            continue
        lines.append(f"vs {LABELS[k]} ({_score(other)}): the tuned static winner is "
                     f"{_relative(static, other)}")
    better = [k for k in others
              if best[k].score is not None and static.score < (best[k].score or 0.0)]
    if better:
        lines.append(
            f"note: {LABELS[better[0]]} scored higher than every tuned static configuration")
    return lines + missing


def _not_comparable(ranking: Ranking, kinds: list[str]) -> list[str]:
    """A line for each kind the study deployed but cannot compare here, saying why (it failed,
    breaks a constraint, or lacks a phase these weights need) — rather than leaving it out."""
    lines = []
    for kind in kinds:
        # one still running is not yet a verdict
        tried = [t for t in ranking.trials if t.config is not None and kind_of(t) == kind
                 and t.ended]
        if tried:
            view = tried[0]
            why = view.failure or view.status
            lines.append(f"vs {LABELS[kind]}: not comparable here — trial {view.number}: {why}")
    return lines
