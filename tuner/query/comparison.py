"""The best trial against the baseline, phase by phase: the table ``tune`` ends with and summary.md
shows.

Every figure goes through ``tuner.query.numbers.with_interval``: once a record carries a 95 %
half-width for a figure, ``half_width`` returns it and the table shows ``value ± half-width``
without other changes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from objectives.scoring import figure, primary_metric
from tuner.query.numbers import change, with_interval
from tuner.store.record import TrialRecord

#: Latency figures shown per phase: (metric, label).
LATENCIES = (("ttft_p50_ms", "TTFT p50"), ("ttft_p99_ms", "TTFT p99"), ("itl_mean_ms", "ITL mean"))


def half_width(metrics: Mapping[str, Any], name: str) -> float | None:
    """The 95 % half-width of ``metrics[name]`` in its own unit: from the stored ``<name>_ci``
    interval (every phase's primary metric has one), else — a study stored before those — the
    throughput's relative ``ci_half_width``."""
    interval = metrics.get(f"{name}_ci")
    if isinstance(interval, list | tuple) and len(interval) == 2:
        return (float(interval[1]) - float(interval[0])) / 2
    relative = metrics.get("ci_half_width")
    value = metrics.get(name)
    if name == "aggregate_tok_s" and isinstance(relative, int | float) \
            and isinstance(value, int | float):
        return float(relative) * float(value)
    return None


def comparison_rows(baseline: TrialRecord | None,
                    best: TrialRecord) -> list[tuple[str, str, str, str]]:
    """(figure, baseline, best, change) per phase: the scored tok/s first, then latencies (lower is
    better)."""
    base_metrics = baseline.metrics if baseline is not None else {}
    rows = []
    for concurrency in sorted(best.metrics):
        after = best.metrics[concurrency]
        before = base_metrics.get(concurrency, {})
        name = primary_metric(concurrency)
        kind = "per-request" if name == "per_request_tok_s_mean" else "aggregate"
        rows.append((f"C={concurrency} {kind} tok/s",
                     with_interval(figure(before, name), half_width(before, name)),
                     with_interval(figure(after, name), half_width(after, name)),
                     change(figure(before, name), figure(after, name))))
        for metric, label in LATENCIES:
            if figure(after, metric) is None:
                continue
            rows.append((f"C={concurrency} {label} ms",
                         with_interval(figure(before, metric), half_width(before, metric),
                                       digits=0),
                         with_interval(figure(after, metric), half_width(after, metric),
                                       digits=0),
                         change(figure(before, metric), figure(after, metric))))
    return rows


def comparison_table(baseline: TrialRecord | None, best: TrialRecord) -> list[str]:
    """The rows as aligned plain-text lines (also pasted into summary.md by the report)."""
    base = f"baseline (#{baseline.number})" if baseline is not None else "baseline"
    header = ("", base, f"best (#{best.number})", "change")
    rows = [header, *comparison_rows(baseline, best)]
    widths = [max(len(r[i]) for r in rows) for i in range(4)]
    return ["  " + "  ".join(cell.ljust(widths[i]) if i == 0 else cell.rjust(widths[i]) for i,
                             cell in enumerate(r))
            .rstrip() for r in rows]


