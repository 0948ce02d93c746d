"""The simulator process: parse like SGLang, listen, play the startup script, warm up, serve until a
signal.

Exit codes as the real server's: 2 for argparse errors (printed by the parser itself), 0 for
``--help``, 1 when startup fails (validation error, out of memory, address in use), 0 after
SIGTERM/SIGINT.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
from collections.abc import Coroutine, Sequence
from typing import TypeVar

from tuner.simulator.config import ServerConfig, resolve
from tuner.simulator.engine import Engine, GenerationFailed, GenerationRequest
from tuner.simulator.profile import DEFAULT_PROFILE, Profile, load_profile
from tuner.simulator.server import ServerState, SimulatorApp, start_http
from tuner.simulator.startup import READY_LINE, Log, plan_startup, run_startup

#: SGLang's warmup request (http_server.py::_execute_server_warmup): a short /generate.
WARMUP_PROMPT = "The capital city of France is"
WARMUP_TOKENS = 8

T = TypeVar("T")


def _write(line: str) -> None:
    # Like Python logging: log lines go to stderr, flushed at once so a log file shows progress
    # live.
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def main(server_argv: Sequence[str], *, profile: str | None = None, time_scale: float = 1.0,
         seed: int = 0) -> int:
    """Run one simulated server; returns the process exit code."""
    if time_scale <= 0:
        raise ValueError("time_scale must be positive")
    prof = load_profile(profile or DEFAULT_PROFILE)
    config = resolve(prof, list(server_argv))  # argparse errors exit 2 here, --help exits 0
    return asyncio.run(serve(prof, config, time_scale=time_scale, seed=seed))


def _server_args_line(config: ServerConfig) -> str:
    shown = ", ".join(f"{k}={v!r}" for k, v in sorted(config.args.items()))
    return f"server_args=ServerArgs({shown})"


async def serve(profile: Profile, config: ServerConfig, *, time_scale: float, seed: int) -> int:
    log = Log(_write)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)

    plan = plan_startup(profile, config)
    if config.startup_error is not None:
        # Validation fails in the launcher, before anything listens.
        await _until(run_startup(plan, time_scale, log), stop)
        return 1 if not stop.is_set() else 0

    log(_server_args_line(config))
    fatal: list[str] = []

    def die(lines: list[str]) -> None:
        # The scheduler process died (a decode batch out of memory): SGLang's launcher then takes
        # the whole process tree down, so the server exits while clients are connected.
        fatal.extend(lines)
        log(lines[0], scheduler=True)
        for line in lines[1:-1]:
            _write(line)
        log(lines[-1])
        stop.set()

    engine = Engine(profile, config, time_scale=time_scale, seed=seed,
                    on_log=lambda line: log(line, scheduler=True), on_fatal=die)
    state = ServerState(profile=profile, config=config, engine=engine, startup_time=plan.timings)
    try:
        runner = await start_http(SimulatorApp(state).build(), config.host, config.port)
    except OSError as exc:
        log(f"ERROR:    [Errno {exc.errno}] error while attempting to bind on address "
            f"('{config.host}', {config.port}): {exc.strerror or exc}")
        return 1
    try:
        started = await _until(run_startup(plan, time_scale, log), stop)
        if started is None:  # signalled while starting
            return 0
        if not started:
            return 1
        engine.start()
        if not config.args.get("skip_server_warmup"):
            await _until(_warmup(engine, log), stop)
        if stop.is_set():
            return 1 if fatal else 0
        state.ready = True
        engine.served = 0  # a hang fault counts the requests served from here on
        log(READY_LINE)
        await stop.wait()
        return 1 if fatal else 0
    finally:
        await engine.stop()
        with contextlib.suppress(Exception):
            await runner.cleanup()


async def _warmup(engine: Engine, log: Log) -> None:
    handle = engine.submit(GenerationRequest(prompt=WARMUP_PROMPT, max_new_tokens=WARMUP_TOKENS,
                                             temperature=0.0))
    try:
        async for _ in handle.chunks():
            pass
    except GenerationFailed as exc:
        # The real scheduler would crash here; the simulator keeps serving so that a tuner sees
        # every request fail (the over-large tree's runtime error), which is the failure it has to
        # learn from.
        log(f"Warmup request failed: {exc}")
        return
    log('INFO:     127.0.0.1:0 - "POST /generate HTTP/1.1" 200 OK')


async def _until(work: Coroutine[object, object, T], stop: asyncio.Event) -> T | None:
    """Run ``work`` until it finishes (its result) or ``stop`` is set (None)."""
    task = asyncio.ensure_future(work)
    stopper = asyncio.ensure_future(stop.wait())
    done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
    stopper.cancel()
    if task in done:
        return task.result()
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task
    return None
