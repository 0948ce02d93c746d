"""Each sampler is one ``SamplerKind``: the study file's names, the builders and the skip policy
agree."""

from __future__ import annotations

import typing

import optuna
import pytest

from tuner.core.errors import SpectuneError
from tuner.search.samplers import (
    SAMPLERS,
    SkippedPhases,
    make_sampler,
    sampler_kind,
    skipped_phases,
)
from tuner.study.spec import SamplerName


def test_the_study_file_accepts_exactly_the_catalogue_and_auto() -> None:
    assert set(typing.get_args(SamplerName)) == {"auto", *SAMPLERS}


@pytest.mark.parametrize("name", [n for n, kind in SAMPLERS.items() if kind.available()])
def test_every_available_kind_builds_an_optuna_sampler(name: str) -> None:
    assert isinstance(make_sampler(name, seed=1), optuna.samplers.BaseSampler)


def test_auto_is_the_grey_box_sampler_and_it_is_never_skipped() -> None:
    assert sampler_kind("auto").name == "greybox"
    assert skipped_phases("greybox") is SkippedPhases.NEVER
    assert skipped_phases("tpe") is SkippedPhases.AT_MEDIAN


def test_a_stored_name_this_version_does_not_know_gets_the_optimistic_bound() -> None:
    assert skipped_phases("cmaes") is SkippedPhases.OPTIMISTIC_BOUND
    assert skipped_phases(None) is SkippedPhases.OPTIMISTIC_BOUND


def test_an_unknown_name_is_refused_with_the_known_ones() -> None:
    with pytest.raises(SpectuneError, match="known: auto, greybox"):
        sampler_kind("cmaes")
