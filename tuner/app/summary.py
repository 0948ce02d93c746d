"""The final answer of ``spectune tune``: what changed against the baseline, what was left running, where things are.

Kept apart from tune.py so the run and its presentation change independently. Every figure goes through
``tuner.query.numbers.with_interval``: once a record carries a 95 % half-width for a figure, ``half_width``
returns it and the table shows ``value ± half-width`` without other changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from objectives.scoring import primary_metric
from tuner.engine.record import TrialRecord
from tuner.engine.storage import redact
from tuner.query.numbers import change, with_interval
from tuner.study.spec import StudySpec

#: Latency figures shown per phase: (metric, label).
LATENCIES = (("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99"), ("itl_mean_ms", "ITL mean"))


@dataclass(frozen=True)
class Locations:
    """Where a user finds what the run left behind."""

    storage: str
    logs: Path | None
    report: Path | None = None


def half_width(metrics: Mapping[str, Any], name: str) -> float | None:
    """The 95 % half-width of ``metrics[name]`` in its own unit, when the phase stored one. Today only the
    throughput has one (``ci_half_width``, relative, from batch means); per-figure intervals slot in here."""
    relative = metrics.get("ci_half_width")
    value = metrics.get(name)
    if name == "aggregate_tok_s" and isinstance(relative, int | float) and isinstance(value, int | float):
        return float(relative) * float(value)
    return None


def comparison_rows(baseline: TrialRecord | None, best: TrialRecord) -> list[tuple[str, str, str, str]]:
    """(figure, baseline, best, change) per phase: the scored tok/s first, then latencies (lower is better)."""
    base_metrics = baseline.metrics if baseline is not None else {}
    rows = []
    for concurrency in sorted(best.metrics):
        after = best.metrics[concurrency]
        before = base_metrics.get(concurrency, {})
        name = primary_metric(concurrency)
        kind = "per-request" if name == "per_request_tok_s_mean" else "aggregate"
        rows.append((f"C={concurrency} {kind} tok/s", with_interval(before.get(name), half_width(before, name)),
                     with_interval(after.get(name), half_width(after, name)), change(before.get(name),
                                                                                   after.get(name))))
        for metric, label in LATENCIES:
            if after.get(metric) is None:
                continue
            rows.append((f"C={concurrency} {label} ms", with_interval(before.get(metric), half_width(before, metric),
                                                                      digits=0),
                         with_interval(after.get(metric), half_width(after, metric), digits=0),
                         change(before.get(metric), after.get(metric))))
    return rows


def comparison_table(baseline: TrialRecord | None, best: TrialRecord) -> list[str]:
    """The rows as aligned plain-text lines (also pasted into summary.md by the report)."""
    base = f"baseline (#{baseline.number})" if baseline is not None else "baseline"
    header = ("", base, f"best (#{best.number})", "change")
    rows = [header, *comparison_rows(baseline, best)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  " + "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i, cell in enumerate(r))
            .rstrip() for r in rows]


def finish_text(spec: StudySpec, best: TrialRecord | None) -> str:
    """What ``[finish]`` did to the target, in words."""
    kind = spec.target.kind
    if spec.finish == "best" and best is not None:
        where = "it keeps running" if kind == "systemd-ssh" else "it stopped with this command"
        return f"target: deployed the best configuration (trial {best.number}) as [finish] deploy = \"best\" says; " \
               f"{where} (spectune deploy --best puts it back any time)"
    if spec.finish == "leave":
        return "target: left as the last trial deployed it ([finish] deploy = \"leave\")"
    if kind == "systemd-ssh":
        return (f"target: removed spectune's drop-in and restarted {spec.target.settings.get('unit', 'the unit')} "
                "with its original configuration ([finish] deploy = \"original\")")
    return ("target: the server started for the last trial was stopped ([finish] deploy = \"original\"); "
            f"`spectune deploy {spec.path} --best` starts the winner")


def summary_lines(spec: StudySpec, baseline: TrialRecord | None, best: TrialRecord | None,
                  where: Locations) -> list[str]:
    """Everything after the study line and before the launch command."""
    lines = []
    if best is not None:
        score = f"{best.score:.3f}" if best.score is not None else "–"
        reference = f"trial {baseline.number}" if baseline is not None else "the reference run"
        lines.append(f"best: trial {best.number}, score {score} (1.0 = the baseline, {reference})")
        lines += comparison_table(baseline, best)
    lines.append(finish_text(spec, best))
    lines.append(f"database: {redact(where.storage)} (run the same command to resume; `spectune trials "
                 f"{spec.path}` lists every trial)")
    if where.logs is not None:
        lines.append(f"server logs: {where.logs} (`spectune trial N {spec.path}` shows one trial's log path and tail)")
    if where.report is not None:
        lines.append(f"report: {where.report.resolve()} (interactive plots; summary.md and trials.csv beside it)")
    return lines
