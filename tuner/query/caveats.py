"""Caveats a winner carries: a weighted phase that collapsed while the score rose.

A weighted score can rise while one of its phases drops sharply — e.g. +4 % overall from a faster
C=1, with C=64 −41 % and its TTFT p50 +79 %. The score alone hides that trade, and a reader
deploying the winner for its +4 % deserves to see it, whether or not the confirmation stage ran.
``collapse_caveats`` names every weighted phase whose primary figure fell by ``COLLAPSE_DROP`` or
more against the baseline (the confirmed, pooled figures when both were confirmed, else the
study's), with its 95 % intervals and the phase's TTFT p50 change. ``tune``, ``best`` and summary.md
show the same lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from objectives.scoring import PhaseMetrics, figure, phase_interval, phase_value, primary_metric
from tuner.store.record import TrialRecord

#: A weighted phase whose primary figure fell by this share or more against the baseline is a
#: collapse.
COLLAPSE_DROP: Final = 0.20


def _figures(record: TrialRecord) -> tuple[PhaseMetrics, str]:
    if record.confirmed is not None and record.confirmed.runs:
        return record.confirmed.pooled, f"confirmed over {len(record.confirmed.runs)} fresh run(s)"
    return record.metrics, "as measured in the study"


def collapse_caveats(baseline: TrialRecord | None, best: TrialRecord | None,
                     weights: Mapping[int, float]) -> list[str]:
    """One line per weighted phase of ``best`` that fell ``COLLAPSE_DROP`` or more against
    ``baseline``."""
    if baseline is None or best is None or baseline.number == best.number:
        return []
    before, how_before = _figures(baseline)
    after, how_after = _figures(best)
    ratios = {}
    for concurrency, weight in weights.items():
        old, new = phase_value(before, concurrency), phase_value(after, concurrency)
        if weight > 0 and old and new is not None:
            ratios[concurrency] = new / old
    if len(ratios) < 2:
        return []  # one weighted phase: its drop is the score's own
    total = sum(weights[c] for c in ratios)
    score_change = sum(weights[c] * r for c, r in ratios.items()) / total - 1.0
    lines = []
    for concurrency, ratio in sorted(ratios.items()):
        if ratio - 1.0 > -COLLAPSE_DROP:
            continue
        metric = ("per-request tok/s" if primary_metric(concurrency) == "per_request_tok_s_mean"
                  else "aggregate tok/s")
        text = (f"caveat: trial {best.number}'s C={concurrency} {metric} is {ratio - 1.0:+.0%} "
                f"against the baseline (trial {baseline.number}) while its score is "
                f"{score_change:+.0%}: {_figure(after, concurrency)} vs "
                f"{_figure(before, concurrency)}")
        ttft_old = figure(before.get(concurrency), "ttft_p50_ms")
        ttft_new = figure(after.get(concurrency), "ttft_p50_ms")
        if ttft_old and ttft_new:
            text += f"; C={concurrency} TTFT p50 {ttft_new / ttft_old - 1.0:+.0%}"
        how = (f"both {how_after}" if how_after == how_before
               else f"{how_after}; the baseline {how_before}")
        lines.append(text + f" ({how})")
    return lines


def _figure(metrics: PhaseMetrics, concurrency: int) -> str:
    value = phase_value(metrics, concurrency) or 0.0
    interval = phase_interval(metrics, concurrency)
    return f"{value:.1f}" + (f" {interval.text(1)}" if interval is not None else "") + " tok/s"
