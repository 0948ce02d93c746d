"""The report's HTML: one file, no external resources. plotly.js is inlined once and each plot is a
div it draws; the tables (summary, steps × concurrency, every trial) are plain HTML, readable
without JavaScript."""

from __future__ import annotations

import html
from dataclasses import dataclass

from tuner.query.effective import shared, summary
from tuner.query.table import TrialRow, failure_text, fmt, phase_label, pm, short_flag, speed_text
from tuner.report.steps import StepsTable

_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1100px; color: #222; \
padding: 0 1em; }
h1 { margin-bottom: .2em; } h2 { margin-top: 1.8em; border-bottom: 1px solid #ddd; }
table { border-collapse: collapse; margin: .6em 0; font-size: 14px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: right; }
th { background: #f4f4f4; } td.l, th.l { text-align: left; }
tr.infeasible td { color: #888; } tr.best td { font-weight: bold; background: #eef8ee; }
pre { background: #f6f6f6; padding: .8em; overflow-x: auto; }
figure { margin: 1em 0; } figure .plot { border: 1px solid #eee; }
figcaption { font-size: 13px; color: #555; }
.warning { background: #fff4e0; border-left: 4px solid #f0a000; padding: .5em 1em; }
.muted { color: #666; }
"""


@dataclass(frozen=True)
class Plot:
    key: str  # file stem and element id
    title: str
    caption: str
    div: str | None  # the plot's HTML (a div plus the script that draws it); None: nothing to plot
    empty_reason: str = ""


@dataclass(frozen=True)
class PageContent:
    title: str
    summary: tuple[tuple[str, str], ...]
    warnings: tuple[str, ...]
    best_command: str | None
    plots: tuple[Plot, ...]
    steps: StepsTable
    top: tuple[TrialRow, ...]
    best_number: int | None
    concurrencies: tuple[int, ...]
    plotly_js: str = ""  # the library, inlined: the page must open offline and make no request
    files: tuple[str, ...] = ()  # the other files written beside the page
    # a trial that leads under these weights but was never confirmed
    leader_number: int | None = None


def render(content: PageContent) -> str:
    e = html.escape
    parts = ["<!DOCTYPE html>\n<html lang=\"en\"><head><meta "
             f"charset=\"utf-8\"><title>{e(content.title)}</title><style>{_CSS}</style><script>{content.plotly_js}</script></head><body>",
             f"<h1>{e(content.title)}</h1>"]
    parts += [f"<p class=\"warning\">{e(w)}</p>" for w in content.warnings]
    parts.append("<table class=\"summary\">" + "".join(
        f"<tr><th class=\"l\">{e(k)}</th><td class=\"l\">{e(v)}</td></tr>" for k,
        v in content.summary) + "</table>")
    if content.best_command:
        parts.append(f"<h2>Best configuration</h2><pre>{e(content.best_command)}</pre>")
    for plot in content.plots:
        parts.append(f"<h2 id=\"{e(plot.key)}\">{e(plot.title)}</h2>")
        if plot.div is None:
            parts.append(f"<p class=\"muted\">{e(plot.empty_reason)}</p>")
            continue
        parts.append(f"<figure>{plot.div}<figcaption>{e(plot.caption)}</figcaption></figure>")
        if plot.key == "history":
            parts.append(_steps_html(content.steps))
    parts.append(_top_html(content))
    if content.files:
        parts.append("<p class=\"muted\">Beside this page: "
                     + ", ".join(f"<a href=\"{e(f)}\">{e(f)}</a>"
                           for f in content.files) + "</p>")
    parts.append("</body></html>\n")
    return "\n".join(parts)


def _steps_html(steps: StepsTable) -> str:
    e = html.escape
    if not steps.columns:
        return ("<h2>Steps × concurrency</h2><p class=\"muted\">No feasible measured trial under "
                "these weights and constraints.</p>")
    head = "".join(f"<th>steps={e(c)}</th>" for c in steps.columns)
    body = []
    for concurrency, cells in steps.rows:
        tds = "".join(f"<td>{cell.value:.0f} <span class=\"muted\">#{cell.trial}</span></td>"
                      if cell else "<td>–</td>"
                      for cell in cells)
        body.append(f"<tr><th class=\"l\">{e(phase_label(concurrency))}</th>{tds}</tr>")
    return ("<h2 id=\"steps\">Steps × concurrency</h2><table class=\"steps\"><tr><th></th>" + head
            + "</tr>"
            + "".join(body) + "</table><p class=\"muted\">Best feasible measured value for each "
            "<code>--speculative-num-steps</code> (over the other tuned flags), and the trial it "
            "came from — the layout of the seed document's table.</p>")


def _top_html(content: PageContent) -> str:
    e = html.escape
    if not content.top:
        return ""
    flags = [f for f, _ in content.top[0].flags]
    confirmed = any(r.confirmed for r in content.top)
    # A column only when SGLang runs some trial differently from its command line; what every trial
    # shares is said once below the table.
    common = shared(r.changes if r.effective else None for r in content.top)
    changed = any(set(r.changes) - set(common) for r in content.top)
    head = ("<tr><th>#</th><th class=\"l\">status</th>"
            + "".join(f"<th>{e(short_flag(f))}</th>" for f in flags)
            + "".join(f"<th>{e(phase_label(c))}</th>" for c in content.concurrencies)
            + "<th>accept</th><th>score ±95%</th>"
            + ("<th>confirmed ±95%</th>" if confirmed else "")
            + ("<th class=\"l\">SGLang runs</th>" if changed else "")
            + "<th class=\"l\">failure</th></tr>")
    body = []
    for r in content.top:
        css = "best" if r.number == content.best_number else "" if r.feasible else "infeasible"
        mark = ("★" if r.number == content.best_number else "☆" if r.number == content.leader_number
                else "")
        failure = failure_text(r)
        cells = "".join(f"<td>{e(fmt(v) if not isinstance(v, float) else f'{v:g}')}</td>" for _,
                        v in r.flags)
        speeds = "".join(f"<td>{speed_text(r, c, v)}</td>" for c, v in r.speeds)
        again = f"<td>{e(r.confirmed.text() if r.confirmed else '')}</td>" if confirmed else ""
        if changed:
            own = tuple(c for c in r.changes if c not in common)
            again += ("<td class=\"l\" "
                      f"title=\"{e('; '.join(c.text() for c in own))}\">{e(summary(own))}</td>")
        body.append(f"<tr class=\"{css}\"><td>{mark}{r.number}</td><td "
                    f"class=\"l\">{e(r.status)}</td>{cells}{speeds}"
                    f"<td>{fmt(r.accept_length, 2)}</td>"
                    f"<td>{fmt(r.score, 3)}{pm(r.score_interval, 3)}</td>{again}"
                    f"<td class=\"l\" title=\"{e(r.message or '')}\">{e(failure)}</td></tr>")
    note = (
        f"<p class=\"muted\">Every trial: SGLang runs {e('; '.join(c.text() for c in common))}.</p>"
        if common else "")
    if content.best_number is not None:
        note += (f"<p class=\"muted\">★ the answer (trial {content.best_number})"
                 + (f"; ☆ trial {content.leader_number} leads under these weights but was never "
                    "confirmed"
                    if content.leader_number is not None else "") + ".</p>")
    return ("<h2 id=\"trials\">Trials</h2><table class=\"trials\">" + head + "".join(body)
            + "</table>" + note)
