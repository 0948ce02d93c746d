"""The command a systemd unit runs today, and the flags of it a spectune drop-in would drop.

spectune's drop-in clears the unit's ``ExecStart=`` and sets its own launch command, so an option
the operator had in the unit but the study does not emit (an API key, a served model name, a context
length, a chat template) would vanish without a word. The preflight reads the unit's command
(``systemctl show -p ExecStart``) and lists them; ``[target] unit_flags`` says whether they are
carried into every deploy or the study refuses.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tuner.core.errors import SpectuneError
from tuner.sglang.options import OptionTable
from tuner.targets.unit_file import split_words

#: ``ExecStart={ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -m sglang.launch_server … ;
#: ignore_errors=no ; … }``
_ARGV = re.compile(r"argv\[\]=(.*?)\s;\s")
#: Options the target itself sets on every deploy (from ``[target]``), never "dropped".
TARGET_OWNED = ("--host", "--port")
#: The comment line of a drop-in that records the unit's options it carries (``unit_flags =
#: "carry"``).
CARRIED_MARK = "# spectune-unit-options: "


class UnitFlagsDropped(SpectuneError):
    """The unit's command has options the study never emits and ``[target] unit_flags`` is "refuse":
    exit 2, before the unit is touched."""

    exit_code = 2


def exec_start_argv(show_output: str) -> list[str] | None:
    """The argv of ``systemctl show -p ExecStart UNIT``'s first command (None: the unit has
    none)."""
    for line in show_output.splitlines():
        if line.startswith("ExecStart="):
            found = _ARGV.search(line + " ; ")
            if found:
                return split_words(found.group(1).strip())
    return None


@dataclass(frozen=True)
class UnitOption:
    name: str  # as the unit writes it, e.g. "--api-key"
    words: tuple[str, ...]  # the option and its values, as they appear in the unit's command

    def text(self) -> str:
        return " ".join(self.words)


def unit_options(argv: Sequence[str], prefix: Sequence[str]) -> list[UnitOption]:
    """The options of the unit's command after the server command (``prefix``; else after a
    wrapper's ``--``; else from the first option on)."""
    if list(argv[:len(prefix)]) == list(prefix):
        start = len(prefix)
    # a wrapper's own options, then ``--``, then the server's (``spectune simulate … -- …``)
    elif "--" in argv:
        start = len(argv) - list(reversed(argv)).index("--")
    else:
        start = next((i for i, w in enumerate(argv) if w.startswith("--")), len(argv))
    out: list[UnitOption] = []
    for word in argv[start:]:
        if word.startswith("--"):
            out.append(UnitOption(word.split("=", 1)[0], (word,)))
        elif out:
            last = out[-1]
            out[-1] = UnitOption(last.name, (*last.words, word))
    return out


def dropped(argv: Sequence[str], prefix: Sequence[str], emitted: Iterable[str],
            table: OptionTable) -> list[UnitOption]:
    """The unit's options a spectune launch command never carries (the study neither fixes nor tunes
    them)."""
    def canonical(name: str) -> str:
        try:
            return table.lookup(name).name
        except LookupError:
            return name

    ours = {canonical(f) for f in (*emitted, *TARGET_OWNED)}
    return [o for o in unit_options(argv, prefix) if canonical(o.name) not in ours]


def carried_by_dropin(ours: str, unit: str, where: str,
                      unit_flags: str) -> tuple[tuple[str, ...] | None, str]:
    """Our own drop-in ``ours`` is in force, so the unit's command is not visible: the options the
    drop-in records it carries (``unit_flags = "carry"``), and the note saying so."""
    kept = next((line.removeprefix(CARRIED_MARK) for line in ours.splitlines()
                 if line.startswith(CARRIED_MARK)), None)
    if kept is not None and unit_flags == "carry":
        return tuple(shlex.split(kept)), (f"{unit}: carried into every deploy, as the drop-in in "
                                          f"force records them: {kept}")
    return None, (f"{where}: a spectune drop-in is in force, so the unit's own command could not "
                  "be compared (restore first to check it)")


def carried_from_unit(lost: Sequence[UnitOption], unit: str, host: str,
                      unit_flags: str) -> tuple[tuple[str, ...], str]:
    """The unit's options ``lost`` that the drop-in would drop: carried into every deploy with a
    note (``unit_flags = "carry"``), else ``UnitFlagsDropped``."""
    listed = ", ".join(o.text() for o in lost)
    if unit_flags == "carry":
        return (tuple(w for o in lost for w in o.words),
                f"{unit}: carried into every deploy from the unit's command "
                f"([target] unit_flags = \"carry\"): {listed}")
    raise UnitFlagsDropped(
        f"{unit} on {host} runs with options the study does not set, which spectune's drop-in (it "
        f"replaces ExecStart) would drop: {listed}. Set [target] unit_flags = \"carry\" to keep "
        "them in every deploy, or give them in [server.flags]")
