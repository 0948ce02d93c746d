"""An interrupted trial's retry is queued as what the trial was queued as: a reference point stays
a reference (never phase-skipped, compared in `best`) and one outside the space stays outside it
(the space asks for its parameters as queued, not the sampler's)."""

from __future__ import annotations

from optuna.distributions import IntDistribution
from optuna.trial import TrialState, create_trial

from tuner.store.keys import Key
from tuner.store.storage import retry_attrs
from tuner.study.branches import OUTSIDE


def test_a_reference_outside_the_space_is_retried_as_one() -> None:
    attrs = {Key.REFERENCE: "off", OUTSIDE: True,
             Key.PARAMS_DECODED: {"--speculative-algorithm": None}, Key.CONFIG_KEY: "k"}
    trial = create_trial(state=TrialState.FAIL, params={"x": 1},
                         distributions={"x": IntDistribution(0, 2)}, user_attrs=attrs)
    retry = retry_attrs(trial)
    assert retry[Key.REFERENCE] == "off" and retry[OUTSIDE] is True
    assert retry[Key.PARAMS_DECODED] == {"--speculative-algorithm": None}
    assert Key.BASELINE not in retry and Key.CONFIG_KEY not in retry  # what it measured: not kept
    assert retry[Key.RETRY_OF] == trial.number


def test_the_baseline_is_retried_as_the_baseline() -> None:
    trial = create_trial(state=TrialState.FAIL, params={}, distributions={},
                         user_attrs={Key.BASELINE: True})
    assert retry_attrs(trial) == {Key.RETRY_OF: trial.number, Key.BASELINE: True}
