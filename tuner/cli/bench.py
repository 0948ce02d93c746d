"""``spectune bench URL`` — benchmark one running server with the same code every trial uses."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from objectives.spec import (
    DEFAULT_IGNORE_EOS,
    DEFAULT_MAX_TOKENS,
    DEFAULT_TEMPERATURE,
    WorkloadSpec,
)
from tuner.core.errors import SpectuneError

if TYPE_CHECKING:
    from objectives.results import BenchmarkResult

#: Exit status when the benchmark ran but did not measure a serving server (see
#: ``BenchmarkFailed``).
EXIT_FAILED = 3
DEFAULT_MAX_ERROR_RATE = 0.10


class BenchmarkFailed(SpectuneError):
    """A phase had no successful request, more failed requests than ``--max-error-rate`` allows, or
    failed as a whole (``simulator-overloaded``, objectives/overload.py): its
    figures describe a broken server, and a script must not take them for a measurement."""

    exit_code = EXIT_FAILED


def failure(result: BenchmarkResult, max_error_rate: float) -> str | None:
    """One line saying why ``result`` is not a valid measurement, or None when it is."""
    reasons = []
    for phase in result.phases:
        errors = ", ".join(f"{kind} {n}" for kind, n in phase.errors.items()) or "none"
        if phase.failure is not None:
            reasons.append(f"{phase.label}: {phase.failure}: {phase.failure_message}")
        elif phase.completed == 0:
            reasons.append(f"{phase.label}: no successful request (errors: {errors})")
        elif phase.error_rate is not None and phase.error_rate > max_error_rate:
            reasons.append(
                f"{phase.label}: error rate {phase.error_rate:.1%} is above --max-error-rate "
                f"{max_error_rate:.1%} (errors: {errors})")
    return "; ".join(reasons) or None


@click.command("bench")
@click.argument("url")
@click.option("--phase", "phases", multiple=True, metavar="SPEC",
              help="A closed-loop phase, repeatable: C=64:n=256, C=64:t=30s, C=1:n=8:warmup=1, "
                   "C=64:n=512:ci=0.02 (stop once the throughput's 95% CI is within ±2%). "
                   "Default: C=1:n=8 then C=64:n=256:warmup=8.")
@click.option("--api", type=click.Choice(["chat", "completions", "generate"]), default="chat",
              show_default=True,
              help="OpenAI chat or completions API, or SGLang's native /generate.")
@click.option("--dataset", default="builtin", show_default=True,
              help="'builtin' (spectune's prompt set), 'synthetic' (--input-tokens long), or a "
                   "JSONL file.")
@click.option("--input-tokens", type=click.IntRange(min=1), default=WorkloadSpec.input_tokens,
              show_default=True, help="Prompt length of the synthetic dataset.")
@click.option("--max-tokens", type=click.IntRange(min=1), default=DEFAULT_MAX_TOKENS,
              show_default=True)
@click.option("--temperature", type=click.FloatRange(min=0), default=DEFAULT_TEMPERATURE,
              show_default=True,
              help="Sampling temperature. 0 inflates speculative acceptance (see docs/metrics.md).")
@click.option("--ignore-eos/--no-ignore-eos", default=DEFAULT_IGNORE_EOS, show_default=True,
              help="Generate past EOS up to --max-tokens (inflates acceptance; off by default).")
@click.option("--model", default=None,
              help="Model name to send (default: the first of /v1/models).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Prompt order and synthetic prompts.")
@click.option("--request-timeout", type=click.FloatRange(min=0, min_open=True), default=300.0,
              show_default=True, help="Seconds one request may take.")
@click.option("--connect-timeout", type=click.FloatRange(min=0, min_open=True), default=10.0,
              show_default=True)
@click.option("--stall-timeout", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True,
              help="Seconds of silence inside a stream before the request counts as stalled.")
@click.option("--max-error-rate", type=click.FloatRange(min=0, max=1),
              default=DEFAULT_MAX_ERROR_RATE, show_default=True,
              help="Exit with status 3 when a phase's failed / (successful + failed) "
                   "requests is above this.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON on stdout.")
@click.option("--records", is_flag=True, help="With --json: include every request's record.")
def command(url: str, phases: tuple[str, ...], api: str, dataset: str, input_tokens: int,
            max_tokens: int, temperature: float, ignore_eos: bool, model: str | None, seed: int,
            request_timeout: float,
            connect_timeout: float, stall_timeout: float, max_error_rate: float, as_json: bool,
            records: bool) -> None:
    """Benchmark the SGLang server at URL (e.g. http://127.0.0.1:30000).

    \b
    Exit status:
      0    every phase measured a serving server
      2    a usage error (bad option, unreadable prompt file)
      3    no server answers at URL (before any request is sent; nothing is printed but that
           line), or a phase had no successful request, an error rate above --max-error-rate,
           or the simulator could not keep its schedule (simulator-overloaded); the results are
           still printed, and one line on stderr says which phase and why
      130  interrupted

    Figures from the simulator at a time scale other than 1 are labelled SCALED when the server says
    its scale (JSON: "time_scale", "scaled").
    """
    import json
    import sys

    from objectives.phase_syntax import parse_phase
    from objectives.prompts import load_source
    from objectives.report import ProgressDisplay, results_table
    from objectives.runner import run_benchmark
    from objectives.spec import BenchmarkSpec
    from tuner.core.console import make_console
    from tuner.core.errors import UsageError
    from tuner.core.net import ask

    if not url.startswith(("http://", "https://")):
        raise UsageError(f"URL must start with http:// or https://, not {url!r}")
    workload = WorkloadSpec(api=api,  # type: ignore[arg-type]
                            dataset=dataset, input_tokens=input_tokens,
                            max_tokens=max_tokens, temperature=temperature, ignore_eos=ignore_eos,
                            model=model, seed=seed, request_timeout_s=request_timeout,
                            connect_timeout_s=connect_timeout, stall_timeout_s=stall_timeout)
    spec = BenchmarkSpec(workload=workload)
    if phases:
        spec = BenchmarkSpec(workload=workload, phases=tuple(parse_phase(p) for p in phases))
    # a usage error (unreadable prompt file) is said first, whatever the server does
    load_source(workload)
    # Before any phase: a port nothing answers on would otherwise cost every phase's requests (199
    # by default) and a table of zeros before the same verdict. Any HTTP answer will do; the phases
    # judge the rest.
    answer = ask(url.rstrip("/"), "/v1/models", connect_timeout + 10)
    if isinstance(answer, str):
        raise BenchmarkFailed(f"no server answers at {url} (GET /v1/models: {answer}): nothing was "
                              "measured")
    try:
        with ProgressDisplay(make_console(stderr=True)) as progress:
            result = run_benchmark(url, spec, progress=progress)
    except KeyboardInterrupt:  # Ctrl-C: the requests in flight are closed with the event loop
        click.echo("interrupted", err=True)
        sys.exit(130)
    if as_json:
        json.dump(result.to_dict(records=records), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        make_console().print(results_table(result))
    if result.scaled:
        click.echo(f"note: the server runs at time scale {result.time_scale:g}: the figures are "
                   "scaled", err=True)
    reason = failure(result, max_error_rate)
    if reason is not None:
        raise BenchmarkFailed(reason)
