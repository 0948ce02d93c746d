"""``spectune trial N STUDY``: everything stored about one trial, as text or JSON.

What the sampler proposed and what was deployed after SGLang's rules, the launch command, timings,
each phase's metrics, the constraints, and for a failure its class, message, the server log's
location and its tail — what someone debugging an overnight run needs without opening the database.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from objectives.scoring import primary_metric
from tuner.query.answers import Answer, ranking_for, require_trials, weights_text
from tuner.query.effective import Change, changes
from tuner.query.load import StudyNotFound, open_stored_study
from tuner.query.numbers import truncate, with_interval
from tuner.query.ranking import TrialView
from tuner.store.record import RejectedBy

#: Log tail lines shown in text (the JSON has all that is stored).
TAIL_LINES = 25
#: A log line longer than this (SGLang prints its whole server_args on one line) is cut in text.
LINE_CHARS = 240
#: Metrics shown per phase in text, in this order (JSON: every stored metric).
_SHOWN = (("per_request_tok_s_mean", "per-request tok/s", ""),
          ("aggregate_tok_s", "aggregate tok/s", ""),
          ("accept_length", "accept length", ""), ("ttft_p50_ms", "TTFT p50", "ms"),
          ("ttft_p99_ms", "TTFT p99", "ms"), ("itl_p50_ms", "ITL p50", "ms"),
          ("itl_p99_ms", "ITL p99", "ms"),
          ("error_rate", "error rate", ""), ("completed", "requests ok", ""))


def trial_detail(study_file: str | Path, number: int, as_json: bool = False) -> Answer:
    stored = open_stored_study(study_file)
    ranking = ranking_for(stored)
    require_trials(stored, ranking)
    view = next((t for t in ranking.trials if t.number == number), None)
    if view is None:
        raise StudyNotFound(f"study {stored.spec.study.name!r} has no trial {number} "
                            f"(trials 0–{ranking.trials[-1].number})")
    best = ranking.best
    data = as_dict(view, is_best=best is not None and best.number == number,
                   weights=weights_text(ranking))
    notes = tuple(f"warning: {w}" for w in stored.warnings)
    if as_json:
        return Answer(json.dumps(data, indent=2, default=str) + "\n", notes)
    return Answer(render(data), notes)


def as_dict(view: TrialView, *, is_best: bool, weights: str) -> dict[str, Any]:
    r = view.record
    config = r.config
    return {
        "number": r.number, "state": r.state.name, "outcome": str(r.outcome) if r.outcome else None,
        "status": view.status, "best": is_best, "baseline": r.baseline, "score": view.score,
        "weights": weights, "feasible": view.feasible, "host": r.host,
        "flags_requested": dict(r.params_decoded), "repairs": list(r.repairs),
        "flags_effective": dict(config.flags) if config is not None else None,
        "env": dict(config.env) if config is not None else None,
        "effective": dict(r.effective) if r.effective else None,
        "sglang_changes": [c.to_json() for c in changes(config, r.effective)],
        "launch": r.launch, "timings": dict(r.timings), "duration_s": r.duration_s,
        "phases": {f"c{c}": dict(m) for c, m in sorted(r.metrics.items())},
        "skipped_phases": list(r.skipped_phases), "constraints": dict(r.constraints),
        "violations": dict(view.violations), "duplicate_of": r.duplicate_of, "reason": r.reason,
        "rejected_by": str(r.rejected_by) if r.rejected_by else None,
        "failure_class": r.failure_class or view.failure, "failure": r.failure, "log": r.log,
        "log_tail": r.log_tail, "failure_cause": str(r.failure_cause) if r.failure_cause else None,
        "run_failure": r.run_failure, "output_check": r.output_check,
    }


def render(d: Mapping[str, Any]) -> str:
    score = (f"score {d['score']:.3f} under weights {d['weights']}" if d["score"] is not None
             else "no score")
    marks = "".join((" ★ best" if d["best"] else "", " (baseline)" if d["baseline"] else ""))
    lines = [f"trial {d['number']}{marks}: {d['status']}, {score}"]
    timings = d["timings"]
    times = ", ".join(f"{k.removesuffix('_s')} {v:.1f} s" for k, v in timings.items())
    took = f"took {d['duration_s']:.1f} s" if d["duration_s"] is not None else "not finished"
    lines.append(f"  state {d['state']}, {took}" + (f" ({times})" if times else "")
                 + (f", host {d['host']}" if d["host"] else ""))
    lines += _flags("flags requested (the proposal)", d["flags_requested"])
    lines += [f"  repaired: {r}" for r in d["repairs"]]
    if d["flags_effective"] is not None:
        lines += _flags("flags effective (deployed)", d["flags_effective"])
    if d["sglang_changes"]:
        lines.append("SGLang runs it with:")
        lines += [f"  {Change(**c).text()}" for c in d["sglang_changes"]]
    if d["duplicate_of"] is not None:
        lines.append(f"  not deployed: the same configuration as trial {d['duplicate_of']} (its "
                     "result reused)")
    if d["launch"]:
        lines += ["launch command:", f"  {d['launch']}"]
    for key, metrics in d["phases"].items():
        concurrency = int(key[1:])
        shown = [f"{label} {_value(metrics.get(name), name, unit)}" for name, label, unit in _SHOWN
                 if metrics.get(name) is not None]
        kind = ("per-request" if primary_metric(concurrency) == "per_request_tok_s_mean"
                else "aggregate")
        lines.append(f"C={concurrency} (scored on {kind} tok/s): " + ", ".join(shown))
    if d["skipped_phases"]:
        lines.append("skipped: " + ", ".join(f"C={c}" for c in d["skipped_phases"])
                     + " (could not beat the best)")
    if d["violations"]:
        lines.append("violates: "
                     + ", ".join(f"{k} (by {v:g})" for k, v in sorted(d["violations"].items())))
    if d["reason"]:
        by = RejectedBy(d["rejected_by"]).label if d.get("rejected_by") else "rejected"
        lines.append(f"{by} before deploying: {d['reason']}")
    if d["failure"] or d["failure_class"]:
        cls = d["failure_class"] or "?"
        # DeployFailed's text starts with its class
        message = (d["failure"] or "").removeprefix(f"{cls}: ")
        lines.append(f"failure: {cls}" + (f": {message}" if message else ""))
        if d.get("failure_cause"):
            lines.append(f"  cause: {d['failure_cause']}")
    lines += output_check_lines(d.get("output_check"))
    if d["log"]:
        lines.append(f"server log: {d['log']}")
    if d["log_tail"]:
        tail = d["log_tail"].rstrip().splitlines()[-TAIL_LINES:]
        lines += [f"log tail (last {len(tail)} lines):",
                  *(f"  | {truncate(t, LINE_CHARS)}" for t in tail)]
    return "\n".join(lines) + "\n"


def output_check_lines(check: Mapping[str, Any] | None) -> list[str]:
    """The output check as ``trial N`` shows it: its result, statistic against threshold, and one
    example."""
    if not check:
        return []
    result = check.get("result")
    if result == "off":
        return [f"output check: off ({check.get('reason')})"]
    if result in ("unchecked", "reference"):
        why = check.get("why") or (
            f"the reference; noise floor {check.get('floor', 0):.2f} (its own prompts at "
            "once vs one at a time), threshold "
            f"{check.get('threshold', 0):.2f}")
        return [f"output check: {result}: {why}"]
    lines = [f"output check: {result}: mean common-prefix fraction "
             f"{check.get('prefix_fraction', 0):.2f} vs trial {check.get('reference_trial')} over "
             f"{check.get('compared')} prompts at temperature 0 (threshold "
             f"{check.get('threshold', 0):.2f} = half the noise floor {check.get('floor', 0):.2f}; "
             f"exact matches {check.get('exact_rate', 0):.0%})"]
    example = check.get("example")
    if example and result != "ok":
        lines += [
            f"  e.g. prompt …{truncate(str(example.get('prompt', '')), 60)!r}, from character "
            f"{example.get('position')} (after …{example.get('agreed', '')!r}):",
            f"    reference: {example.get('reference', '')!r}",
            f"    this trial: {example.get('output', '')!r}"]
    return lines


def _flags(title: str, flags: Mapping[str, Any]) -> list[str]:
    if not flags:
        return [f"{title}: none"]
    return [f"{title}:", *(f"  {k}" if v is True else f"  {k} {v}" for k, v in flags.items())]


def _value(value: Any, name: str, unit: str) -> str:
    if isinstance(value, float):
        digits = 3 if name == "error_rate" else 2 if name == "accept_length" else 1
        return with_interval(value, digits=digits, unit=unit)
    return f"{value} {unit}".rstrip()
