"""``spectune init --from-unit HOST UNIT``: a study file from the command a running systemd unit
runs.

The unit's command is read over SSH (``systemctl show -p ExecStart UNIT``,
tuner/targets/unit_command.py) and split into the server command (``[target] command``),
``--host``/``--port`` (``listen_host``/``server_port``), the flags the study tunes that the unit
sets (their values become ``[baseline]``: what the server runs today) and every other option
(``[server.flags]``, so the drop-in drops nothing).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from tuner.core.errors import UsageError
from tuner.targets.ssh import Connection, SSHSettings
from tuner.targets.unit_command import exec_start_argv, unit_options


@dataclass(frozen=True)
class UnitStart:
    """What a unit runs, in study-file terms."""

    host: str
    unit: str
    ssh: dict[str, Any]  # user, ssh_port, key_file, known_hosts, accept_unknown_host_key as given
    command: tuple[str, ...]
    flags: dict[str, Any]  # every option but --host/--port, by name without "--"
    server_port: int | None = None
    listen_host: str | None = None
    notes: tuple[str, ...] = field(default=())


def read_unit(settings: SSHSettings, unit: str) -> list[str]:
    """The unit's command, read over SSH (one-line errors: unreachable host, unknown unit, no
    ExecStart)."""
    conn = Connection(settings)
    try:
        result = conn.run(["systemctl", "show", "-p", "ExecStart", unit], check=False)
    finally:
        conn.close()
    argv = exec_start_argv(result.stdout) if result.ok else None
    if argv is None:
        shown = (result.stderr or result.stdout).strip()[:200] or "systemctl show gave none"
        raise UsageError(f"--from-unit: {unit} on {settings.host} has no ExecStart= ({shown})")
    return argv


def unit_start(argv: Sequence[str], host: str, unit: str, ssh: dict[str, Any]) -> UnitStart:
    words = list(argv)
    if "--" in words:  # a wrapper's own options, then ``--``, then the server's
        end = len(words) - words[::-1].index("--")
    else:
        end = next((i for i, w in enumerate(words) if w.startswith("--")), len(words))
    command = tuple(words[:end])
    flags: dict[str, Any] = {}
    port = listen = None
    for option in unit_options(words, command):
        name, _, inline = option.words[0].partition("=")
        values = ([inline] if inline else []) + list(option.words[1:])
        key = name.removeprefix("--")
        if key == "port" and values:
            port = int(values[0])
            continue
        if key == "host" and values:
            listen = values[0]
            continue
        flags[key] = True if not values else _typed(values[0]) if len(values) == 1 else [
            _typed(v) for v in values]
    if not command:
        raise UsageError(
            f"--from-unit: cannot tell the server command in {unit}'s ExecStart: {' '.join(words)}")
    return UnitStart(host, unit, ssh, command, flags, port, listen)


def _typed(text: str) -> Any:
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            continue
    return text
