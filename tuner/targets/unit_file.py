"""systemd quoting and the drop-in we write for a systemd unit.

systemd does not use shell quoting. In a unit file a command line is split by systemd itself: words
in double quotes may hold spaces and C escapes (``\\n``, ``\\"``, ``\\\\``, ``\\xNN``); ``%`` starts
a specifier (``%h``, ``%n``, …) anywhere on the line, and in ``ExecStart=`` a ``$NAME`` is replaced
by an environment variable. So every word is written double-quoted with ``\\``, ``"`` and control
characters escaped, ``%`` doubled and (in command lines only) ``$`` doubled. A raw newline can never
reach the file: it would end the setting and start a new one — the unit-file equivalent of a shell
injection.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from tuner.sglang.launch import LaunchCommand

#: Our drop-in's file name; "50-" sorts it after distribution drop-ins and before late local
#: overrides.
DROPIN_NAME = "50-spectune.conf"
#: The comment that marks a drop-in as ours; it carries the study name so a leftover can be
#: attributed.
MARKER = "# spectune-study:"

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_C_ESCAPES = {"\\": "\\\\", '"': '\\"', "\n": "\\n", "\r": "\\r", "\t": "\\t", "\a": "\\a",
              "\b": "\\b", "\f": "\\f", "\v": "\\v"}


def quote_word(word: str, *, command: bool = True) -> str:
    """One word for a unit file, double-quoted. ``command=False`` for ``Environment=`` (no ``$``
    expansion)."""
    out = []
    for ch in word:
        if ch in _C_ESCAPES:
            out.append(_C_ESCAPES[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif ch == "%":
            out.append("%%")
        elif ch == "$" and command:
            out.append("$$")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def exec_line(argv: Sequence[str]) -> str:
    """The value of ``ExecStart=`` for ``argv``: the first word is the executable, as systemd
    expects."""
    if not argv:
        raise ValueError("empty command line")
    return " ".join(quote_word(w) for w in argv)


def environment_line(name: str, value: str) -> str:
    if not _ENV_NAME.fullmatch(name):
        raise ValueError(f"not a valid environment variable name: {name!r}")
    return quote_word(f"{name}={value}", command=False)


def render_dropin(launch: LaunchCommand, study: str) -> str:
    """The drop-in that replaces the unit's command line and adds the configuration's environment.

    ``ExecStart=`` with no value first clears the unit's own command (a service may only have one),
    so everything else in the user's unit — User=, limits, Restart= — stays in force.
    """
    safe_study = "".join(ch if ch.isprintable() else "?" for ch in study)
    lines = [
        "# Written by spectune; delete this file (then `systemctl daemon-reload` and restart the "
        "unit)",
        "# to return to the unit's own configuration.",
        f"{MARKER} {safe_study}",
        "[Service]",
        "ExecStart=",
        f"ExecStart={exec_line(launch.argv)}",
    ]
    lines.extend(f"Environment={environment_line(k, v)}" for k, v in launch.env)
    return "\n".join(lines) + "\n"


def marker_study(text: str) -> str | None:
    """The study name in one of our drop-ins, or None when the text is not ours."""
    for line in text.splitlines():
        if line.startswith(MARKER):
            return line[len(MARKER):].strip()
    return None


# ----- reading back (tests and diagnostics) -------------------------------------------------------
_UNESCAPES = {"n": "\n", "r": "\r", "t": "\t", "a": "\a", "b": "\b", "f": "\f", "v": "\v",
              "\\": "\\", '"': '"', "'": "'", "s": " "}


def split_words(value: str, *, command: bool = True) -> list[str]:
    """systemd's splitting of a setting value into words (quotes, C escapes, ``%%``, and ``$$`` in
    commands).

    Only what ``quote_word`` produces plus plain unquoted words is supported; other specifiers or
    ``$VAR`` raise ``ValueError`` because we never write them.
    """
    words: list[str] = []
    i, n = 0, len(value)
    while True:
        while i < n and value[i] in " \t":
            i += 1
        if i >= n:
            return words
        word: list[str] = []
        quote = None
        while i < n:
            ch = value[i]
            if quote is None and ch in " \t":
                break
            if ch in "\"'" and quote is None:
                quote = ch
            elif ch == quote:
                quote = None
            elif ch == "\\":
                i += 1
                if i >= n:
                    raise ValueError("trailing backslash")
                esc = value[i]
                if esc == "x":
                    word.append(chr(int(value[i + 1:i + 3], 16)))
                    i += 2
                elif esc in _UNESCAPES:
                    word.append(_UNESCAPES[esc])
                else:
                    raise ValueError(f"unsupported escape \\{esc}")
            elif ch == "%":
                if value[i + 1:i + 2] != "%":
                    raise ValueError("unexpected specifier")
                word.append("%")
                i += 1
            elif ch == "$" and command:
                if value[i + 1:i + 2] != "$":
                    raise ValueError("unexpected variable reference")
                word.append("$")
                i += 1
            else:
                word.append(ch)
            i += 1
        if quote is not None:
            raise ValueError("unbalanced quoting")
        words.append("".join(word))
