"""The fault-injection cases per class, and how many hold: the table in docs/faults.md.

A case is a test marked ``@pytest.mark.fault("CLASS")`` (a Hypothesis test counts its examples). The
script runs them all in one pytest run — the storage outages too, which the default test command
leaves out — and counts per class: held (passed), not held (failed or errored, xfail included), not
run (skipped: a missing system binary). ``--collect`` only counts the cases, in seconds.

    .venv/bin/python bench/fault_counts.py              # about 15 min on a busy 2-core machine
    .venv/bin/python bench/fault_counts.py --collect
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

REPO = Path(__file__).resolve().parent.parent
#: Where the marked cases live (collecting the whole suite would import every test module).
PATHS = ("tests/faults", "tests/integration/objectives/test_hostile_server.py",
         "tests/unit/targets/test_targets_readiness.py",
         "tests/integration/targets/test_systemd_ssh.py")
CLASSES = ("kill_points", "signals", "study_mutations", "hostile_values", "study_edits",
           "hostile_server", "ssh", "storage")


@dataclass(eq=False)  # a pluggy plugin must be hashable
class Tally:
    """A pytest plugin: each marked case's class and weight (examples), then its outcome."""

    kind: dict[str, str] = field(default_factory=dict)
    weight: dict[str, int] = field(default_factory=dict)
    outcome: dict[str, str] = field(default_factory=dict)

    def pytest_collection_modifyitems(self, items: list[Any]) -> None:
        for item in items:
            marker = item.get_closest_marker("fault")
            if marker is None:
                continue
            self.kind[item.nodeid] = marker.args[0]
            settings = getattr(getattr(item, "obj", None), "_hypothesis_internal_use_settings",
                               None)
            self.weight[item.nodeid] = settings.max_examples if settings is not None else 1

    def pytest_runtest_logreport(self, report: Any) -> None:
        if report.nodeid not in self.kind:
            return
        if report.failed or getattr(report, "wasxfail", None) is not None:
            self.outcome[report.nodeid] = "not held"
        elif report.skipped and report.nodeid not in self.outcome:
            self.outcome[report.nodeid] = "not run"
        elif report.when == "call" and report.passed:
            self.outcome.setdefault(report.nodeid, "held")

    def table(self, *, ran: bool) -> str:
        rows = ["| class | cases | held | not held | not run |",
                "|---|---:|---:|---:|---:|"] if ran else \
            ["| class | cases |", "|---|---:|"]
        totals: Counter[str] = Counter()
        for kind in CLASSES:
            ids = [n for n, k in self.kind.items() if k == kind]
            counts: Counter[str] = Counter()
            for n in ids:
                counts["cases"] += self.weight[n]
                counts[self.outcome.get(n, "not run")] += self.weight[n]
            totals.update(counts)
            rows.append(_row(kind, counts, ran))
        rows.append(_row("**all**", totals, ran))
        return "\n".join(rows)

    def failures(self) -> list[str]:
        return sorted(n for n, o in self.outcome.items() if o == "not held")


def _row(name: str, counts: Counter[str], ran: bool) -> str:
    if not ran:
        return f"| {name} | {counts['cases']} |"
    return (f"| {name} | {counts['cases']} | {counts['held']} | {counts['not held']} | "
            f"{counts['not run']} |")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collect", action="store_true", help="count the cases only, run nothing")
    args = parser.parse_args()
    tally = Tally()
    # The last -m wins over the configured "not storage_outage": every fault case, outages included.
    options = [*PATHS, "-m", "fault", "-p", "no:cacheprovider", "-q", "--rootdir", str(REPO)]
    if args.collect:
        options.append("--collect-only")
    code = pytest.main(options, plugins=[tally])
    print(tally.table(ran=not args.collect))
    for nodeid in tally.failures():
        print(f"not held: {nodeid}")
    return 0 if code in (0, 1) else int(code)  # 1: some case did not hold, which the table says


if __name__ == "__main__":
    sys.exit(main())
