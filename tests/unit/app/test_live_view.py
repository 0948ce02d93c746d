"""The live view of `spectune tune`: a trial's flags from its deploy on, its own clock beside the
study's, and no measured-request count during warm-up."""

from __future__ import annotations

import io

from rich.console import Console

from objectives.progress import PhaseProgress
from tuner.app.progress import LiveView, TrialClock


def _line(view: LiveView) -> str:
    return str(view.progress.tasks[0].fields["detail"])


def test_the_live_line_shows_the_trials_flags_its_clock_and_warmup_without_measured_counts() -> None:  # noqa: E501 - the test's name says what it checks
    view = LiveView(Console(file=io.StringIO(), force_terminal=True, width=200), total=4)
    view.on_deploy(7, {"--speculative-num-steps": 3, "--speculative-eagle-topk": 1,
                       "--mem-fraction-static": 0.86})
    view.on_stage(7, "deploy")
    assert "trial 7: deploy" in _line(view) \
           and "[num-steps=3 eagle-topk=1 mem-fraction-static=0.86]" in _line(view)
    view._trial_started[7] -= 75  # the trial began 75 s ago; the study earlier still
    assert str(TrialClock(view).render(view.progress.tasks[0])) == "trial 1:15"
    view.on_phase(PhaseProgress("C=64", "warmup", 0, 0, 128, 0.0, None, 0))
    assert "C=64 warming up" in _line(view) and "0/128" not in _line(view)
    view.on_phase(PhaseProgress("C=64", "measure", 12, 1, 128, 3.0, None, 900))
    assert "C=64 measure 12/128, 1 failed" in _line(view) and "num-steps=3" in _line(view)
    view.on_stage(8, "propose")  # the next trial: the last one's flags go
    assert "num-steps" not in _line(view)


def test_a_narrow_terminal_keeps_the_clocks_and_the_eta_and_says_the_phase_once() -> None:
    """At 80 columns the line's end is cut: the trial's clock, the study's and the ETA come before
    the long part (best, stage, flags), so that is what goes."""
    view = LiveView(Console(file=io.StringIO(), force_terminal=True, width=80), total=4,
                    durations=[60.0])
    view.on_deploy(2, {"--speculative-num-steps": 3, "--speculative-eagle-topk": 1,
                       "--mem-fraction-static": 0.86, "--cuda-graph-max-bs-decode": 64})
    view.on_stage(2, "C=64")
    view.on_phase(PhaseProgress("C=64", "measure", 12, 0, 128, 3.0, None, 900))
    assert "trial 2: C=64 measure 12/128" in _line(view) and _line(view).count("C=64") == 1
    out = io.StringIO()
    Console(file=out, width=80, color_system=None).print(view.progress.get_renderable())
    shown = out.getvalue()
    assert "trial 0:0" in shown and "study" in shown and "ETA 4m00s" in shown, shown
