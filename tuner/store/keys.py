"""The names spectune stores under: trial user attributes (``Key``) and study user attributes
(``StudyKey``), each written once here (tuner/store/record.py reads and writes a trial's).
"""

from __future__ import annotations

from typing import Final


class Key:
    """Trial user attribute names (reports, ``best``, ``deploy`` and old databases rely on these
    exact names)."""

    OUTCOME: Final = "outcome"  # an Outcome of STORED_OUTCOMES (tuner/store/record.py)
    COUNTS: Final = "counts"  # True when the trial used the server (counts towards n_trials)
    # a skipped trial's is its optimistic bound (what the sampler is told), never shown
    SCORE: Final = "score"
    # [low, high]: the score's 95 % interval (None for a skipped trial)
    SCORE_CI: Final = "score_ci"
    PARAMS_DECODED: Final = "params_decoded"  # the proposal's flag values, before repairs
    REPAIRS: Final = "repairs"
    REASON: Final = "reason"  # why a proposal was rejected
    REJECTED_BY: Final = "rejected_by"  # a RejectedBy: the target's own SGLang, or spectune's rules
    CONFIG: Final = "config"  # ServerConfig.to_json()
    # the effective key (Proposal.key): stored first, so other workers see it
    CONFIG_KEY: Final = "config_key"
    # what SGLang runs: auto-chosen tree, page size, backend, graphs, request cap
    EFFECTIVE: Final = "effective"
    PHASES: Final = "phases"  # concurrency (as a string) → that phase's metrics
    SKIPPED_PHASES: Final = "skipped_phases"
    SKIP: Final = "skip"  # the bound that made the remaining phases not worth running
    FAILURE_CLASS: Final = "failure_class"
    FAILURE: Final = "failure"
    # a FailureCause (tuner/targets/classify.py): what the samplers read
    FAILURE_CAUSE: Final = "failure_cause"
    #: Evidence of a failure while measured: {"phase": "c64", "concurrency": 64, "exit": "...",
    #: "errors": {...}, "completed": n, "failed": n} (crashed-under-load, hung).
    RUN_FAILURE: Final = "run_failure"
    #: The output check (tuner/run/outputs.py): statistic, floor, threshold, verdict and one
    #: example.
    OUTPUT_CHECK: Final = "output_check"
    LOG_TAIL: Final = "log_tail"
    LOG: Final = "log"  # where the server's log is (deploy fact)
    LAUNCH: Final = "launch"  # the launch command (deploy fact)
    BASE_URL: Final = "base_url"  # deploy fact
    TIMINGS: Final = "timings"  # deploy_s, ready_s, benchmark_s
    HOST: Final = "host"
    BASELINE: Final = "baseline"  # set when the baseline is enqueued
    DUPLICATE_OF: Final = "duplicate_of"
    TAKEN_BY: Final = "taken_by"
    RETRY_OF: Final = "retry_of"  # set when an interrupted trial's parameters are enqueued again
    NEIGHBOUR_OF: Final = "neighbour_of"  # set when a neighbour of a repeated proposal is enqueued
    #: "adaptive" or "off": SGLang's own choice measured beside the tuning
    #: (tuner/search/references.py)
    REFERENCE: Final = "reference"


class StudyKey:
    """Study user attribute names."""

    # the unit's own options deploys keep (unit_flags = "carry")
    UNIT_OPTIONS: Final = "unit_options_carried"
    # concurrency (as a string) → the metric a score of 1.0 stands for
    REFERENCES: Final = "references"
    REFERENCES_TRIAL: Final = "references_trial"  # the trial whose measurement the references are
    #: {"baseline": n | None, "order": [n, …], "trials": {"n": {"runs": [phases, …], "failed": k}}}:
    #: the confirmation stage's fresh runs (each run's phases stored as ``Key.PHASES`` is), in the
    #: order measured.
    CONFIRMATION: Final = "confirmation"
    BASELINE_ENQUEUED: Final = "baseline_enqueued"
    SAMPLER: Final = "sampler"
    # the SGLang installed on the target, as its preflight found it
    SGLANG_VERSION: Final = "sglang_version"
    #: The output check's reference: {"trial": n, "outputs": [...], "floor": {...}}
    #: (tuner/run/outputs.py).
    OUTPUT_REFERENCE: Final = "output_reference"
    #: Why the study turned the output check off ([check] outputs = false): stored so every reader
    #: sees it.
    OUTPUT_CHECK_OFF: Final = "output_check_off"

    @staticmethod
    def interrupted(number: int) -> str:
        return f"interrupted_{number}"

    @staticmethod
    def sglang_table(version: str, build: str) -> str:
        """The option table a target's SGLang ``version`` (``build``) supplied
        (tuner/store/tables.py)."""
        return f"sglang_table:{version}:{build}"
