"""Test doubles of ``systemctl``, ``journalctl`` and ``sudo`` for the SSH login the tests drive.

Installed on the login's PATH by ``conftest.py`` as small wrappers (``systemctl`` →
``fake_systemd.py systemctl``). It behaves like systemd where the tuner can tell the difference:
- unit files and drop-ins are read from ``$FAKE_SYSTEMD_DIR`` (``UNIT.service`` +
  ``UNIT.service.d/*.conf`` in lexical order; an empty ``ExecStart=`` clears the list); only
  ``daemon-reload`` makes edits visible, so a tuner that forgets it restarts the old command line;
- command lines are split the systemd way, written independently of spectune's own code: specifiers
  first (``%%``, ``%n``; others are an error), then words with quotes and C escapes, then ``$$`` and
  ``$VAR``;
- ``restart`` stops the running process (SIGTERM to its group, waiting for it) and starts ExecStart
  under a supervisor that writes the output to a journal with timestamps and records the exit
  status;
- ``show``/``is-active`` report ActiveState/SubState/ExecMainCode/ExecMainStatus; ``journalctl -u U
  -n N [--since @T] [-o cat]`` prints the journal's tail.
Nothing here imports spectune. State lives in ``$FAKE_SYSTEMD_STATE``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

UNIT_DIR = Path(os.environ.get("FAKE_SYSTEMD_DIR", "/nonexistent"))
STATE = Path(os.environ.get("FAKE_SYSTEMD_STATE", "/nonexistent"))
ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "a": "\a", "b": "\b", "f": "\f", "v": "\v", "\\": "\\",
           '"': '"', "'": "'", "s": " "}


# ----- unit files ---------------------------------------------------------------------------------
def specifiers(value: str, unit: str) -> str:
    def repl(m: re.Match[str]) -> str:
        if m.group(1) == "%":
            return "%"
        if m.group(1) == "n":
            return unit
        raise SystemExit(f"unsupported specifier %{m.group(1)}")

    return re.sub(r"%(.)", repl, value)


def split(value: str) -> list[str]:
    words, i = [], 0
    while i < len(value):
        if value[i].isspace():
            i += 1
            continue
        word, quote = "", None
        while i < len(value) and (quote or not value[i].isspace()):
            c = value[i]
            if quote is None and c in "\"'":
                quote = c
            elif c == quote:
                quote = None
            elif c == "\\":
                e = value[i + 1]
                if e == "x":
                    word += chr(int(value[i + 2:i + 4], 16))
                    i += 2
                else:
                    word += ESCAPES[e]
                i += 1
            else:
                word += c
            i += 1
        if quote:
            raise SystemExit("unbalanced quoting")
        words.append(word)
    return words


def expand_vars(word: str, env: dict[str, str]) -> str:
    return re.sub(r"\$\$|\$\{(\w+)\}|\$(\w+)",
                  lambda m: "$" if m.group(0) == "$$" else env.get(m.group(1) or m.group(2), ""),
                  word)


def load_unit(unit: str) -> dict[str, object]:
    files = [UNIT_DIR / unit, *sorted((UNIT_DIR / f"{unit}.d").glob("*.conf"))]
    exec_start: list[list[str]] = []
    environment: dict[str, str] = {}
    for path in files:
        if not path.is_file():
            continue
        section = None
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if not line or line[0] in "#;":
                continue
            if line.startswith("["):
                section = line
                continue
            key, _, value = line.partition("=")
            if section != "[Service]":
                continue
            value = specifiers(value, unit)
            if key == "ExecStart":
                exec_start = [] if not value else [*exec_start, split(value)]
            elif key == "Environment":
                environment.update(w.split("=", 1) for w in split(value))  # type: ignore[misc]
    if len(exec_start) != 1:
        raise SystemExit(f"{unit}: needs exactly one ExecStart=, has {len(exec_start)}")
    argv = [expand_vars(w, environment) for w in exec_start[0]]
    return {"argv": argv, "env": environment}


# ----- state --------------------------------------------------------------------------------------
def status_path(unit: str) -> Path:
    return STATE / f"{unit}.status.json"


def read_status(unit: str) -> dict[str, str]:
    try:
        return json.loads(status_path(unit).read_text())
    except (OSError, ValueError):
        return {"ActiveState": "inactive", "SubState": "dead", "ExecMainCode": "0",
                "ExecMainStatus": "0", "MainPID": "0", "SupervisorPID": "0"}


def write_status(unit: str, **fields: str) -> None:
    status = {**read_status(unit), **fields}
    tmp = status_path(unit).with_suffix(".tmp")
    tmp.write_text(json.dumps(status))
    tmp.replace(status_path(unit))


def journal(unit: str, line: str) -> None:
    with open(STATE / f"{unit}.journal", "a") as f:
        f.write(f"{time.time():.6f}\t{line}\n")


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"


# ----- systemctl ----------------------------------------------------------------------------------
def daemon_reload() -> None:
    for unit_file in UNIT_DIR.glob("*.service"):
        (STATE / f"{unit_file.name}.loaded.json").write_text(json.dumps(load_unit(unit_file.name)))


def stop(unit: str) -> None:
    sup = int(read_status(unit).get("SupervisorPID", "0"))
    if sup and alive(sup):
        write_status(unit, ActiveState="deactivating", SubState="stop-sigterm")
        os.killpg(sup, signal.SIGTERM)
        deadline = time.time() + 20
        while alive(sup) and time.time() < deadline:
            time.sleep(0.02)
        if alive(sup):
            os.killpg(sup, signal.SIGKILL)
        write_status(unit, ActiveState="inactive", SubState="dead", SupervisorPID="0", MainPID="0")


def start(unit: str) -> int:
    loaded = STATE / f"{unit}.loaded.json"
    if not loaded.exists():  # systemd read the unit at boot
        loaded.write_text(json.dumps(load_unit(unit)))
    write_status(unit, ActiveState="activating", SubState="start", MainPID="0")
    sup = subprocess.Popen([sys.executable, __file__, "supervise", unit], start_new_session=True,
                           stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.DEVNULL)
    deadline = time.time() + 10
    while time.time() < deadline:
        status = read_status(unit)
        if status.get("SupervisorPID") == str(sup.pid) and status["ActiveState"] != "activating":
            return 0
        time.sleep(0.01)
    print(f"Job for {unit} timed out.", file=sys.stderr)
    return 1


def supervise(unit: str) -> None:
    config = json.loads((STATE / f"{unit}.loaded.json").read_text())
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONUNBUFFERED": "1",
           **config["env"]}
    stopping = False
    try:
        child = subprocess.Popen(config["argv"], env=env, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as exc:
        journal(unit, f"{unit}: Failed to execute {config['argv'][0]}: {exc.strerror}")
        write_status(unit, ActiveState="failed", SubState="failed", ExecMainCode="1",
                     ExecMainStatus="203", SupervisorPID=str(os.getpid()))
        return

    def on_term(*_: object) -> None:
        nonlocal stopping
        stopping = True
        child.send_signal(signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_term)
    write_status(unit, ActiveState="active", SubState="running", MainPID=str(child.pid),
                 ExecMainCode="0", ExecMainStatus="0", SupervisorPID=str(os.getpid()))
    journal(unit, f"Started {unit}.")
    assert child.stdout is not None
    for raw in child.stdout:
        journal(unit, raw.decode(errors="replace").rstrip("\n"))
    code = child.wait()
    if stopping:
        write_status(unit, ActiveState="inactive", SubState="dead", ExecMainCode="1",
                     ExecMainStatus="0")
        return
    how = ("killed", str(-code)) if code < 0 else ("exited", str(code))
    journal(unit, f"{unit}: Main process exited, code={how[0]}, status={how[1]}")
    failed = code != 0
    write_status(unit, ActiveState="failed" if failed else "inactive", SubState="failed" if failed
                 else "dead", ExecMainCode="2" if code < 0 else "1", ExecMainStatus=how[1])


def systemctl(args: list[str]) -> int:
    verb, rest = args[0], args[1:]
    if verb == "daemon-reload":
        daemon_reload()
        return 0
    props = []
    while rest and rest[0].startswith("-"):
        opt = rest.pop(0)
        if opt == "-p":
            props += rest.pop(0).split(",")
        elif opt.startswith("--property="):
            props += opt.split("=", 1)[1].split(",")
    unit = rest[0]
    if not (UNIT_DIR / unit).is_file():
        print(f"Unit {unit} not found.", file=sys.stderr)
        return 5
    if verb == "restart":
        stop(unit)
        return start(unit)
    if verb == "stop":
        stop(unit)
        return 0
    status = read_status(unit)
    if verb == "is-active":
        print(status["ActiveState"])
        return 0 if status["ActiveState"] == "active" else 3
    if verb == "show":
        for p in props or list(status):
            if p == "ExecStart":  # systemd's own rendering of the loaded command
                argv = load_unit(unit)["argv"]
                assert isinstance(argv, list)
                print(f"ExecStart={{ path={argv[0]} ; argv[]={' '.join(argv)} ; ignore_errors=no ; "
                      "start_time=[n/a] ; stop_time=[n/a] ; pid=0 ; code=(null) ; status=0/0 }")
                continue
            print(f"{p}={status.get(p, '')}")
        return 0
    if verb == "cat":
        print(json.dumps(load_unit(unit)))
        return 0
    print(f"unsupported: systemctl {verb}", file=sys.stderr)
    return 1


def journalctl(args: list[str]) -> int:
    unit, lines, since = None, 10, 0.0
    it = iter(args)
    for a in it:
        if a == "-u":
            unit = next(it)
        elif a == "-n":
            lines = int(next(it))
        elif a == "--since":
            value = next(it)
            if not value.startswith("@"):
                raise SystemExit("the double only understands --since @EPOCH")
            since = float(value[1:])
        elif a == "-o":
            if next(it) != "cat":
                raise SystemExit("the double only prints -o cat")
        elif a not in ("--no-pager", "-q"):
            raise SystemExit(f"unsupported journalctl argument {a}")
    path = STATE / f"{unit}.journal"
    entries = path.read_text().splitlines() if path.exists() else []
    selected = [e.split("\t", 1)[1] for e in entries if float(e.split("\t", 1)[0]) >= since]
    for line in selected[-lines:] if lines else []:
        print(line)
    return 0


def sudo(args: list[str]) -> int:
    with open(STATE / "sudo.log", "a") as f:
        f.write(json.dumps(args) + "\n")
    if args[:1] != ["-n"]:
        print("sudo: a password is required", file=sys.stderr)
        return 1
    args = args[1:]
    if args[:1] == ["--"]:
        args = args[1:]
    os.execvp(args[0], args)
    return 127


def main() -> int:
    tool, args = sys.argv[1], sys.argv[2:]
    if tool == "supervise":
        supervise(args[0])
        return 0
    return {"systemctl": systemctl, "journalctl": journalctl, "sudo": sudo}[tool](args)


if __name__ == "__main__":
    sys.exit(main())
