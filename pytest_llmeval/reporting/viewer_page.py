"""The page of `pytest-llmeval view`: one self-contained HTML file that renders the viewer payload (issue 41).

Pure: takes the payload (viewer.py's build_payload) and returns text. No pytest, no torch. The page needs no
server and no network: inline CSS, the payload as JSON in a non-executed script element, and the page's own
script (viewer.js, next to this module) inline. Everything the page shows from the payload is built by that
script with createElement/textContent; the only text this module writes into HTML is the header, escaped.

Threat model: outputs, inputs and row ids are model- or user-written text. In the JSON block every `<`, `>`
and `&` is written as a \\uXXXX escape, so no text can close the script element or open a comment; U+2028 and
U+2029 likewise, so the block stays valid if anyone ever reads it as a JS literal; lone surrogates too, so the
page can be written as UTF-8. A Content-Security-Policy allows only this page's own script (by its hash),
no network and no images: if something ever did slip through, it could neither run nor load anything.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from collections.abc import Mapping
from importlib import resources
from typing import Any

from pytest_llmeval.reporting.html import _CSS
from pytest_llmeval.reporting.html_parts import _ADAPTER_COLOUR, _BASE_COLOUR, _WORSE_COLOUR, _e

PAYLOAD_VERSION = 1

# Characters a JSON text may hold that must not reach the HTML parser or a JS parser as themselves.
_UNSAFE = re.compile("[<>&\u2028\u2029\ud800-\udfff]")

# The viewer's own rules, beside the report's (_CSS): tabs, filters, charts, the diff, paging.
_VIEWER_CSS = """
[role=tablist] { display: flex; gap: .25rem; border-bottom: 2px solid #888; margin: 1rem 0 0; }
[role=tab] { font: inherit; padding: .45rem 1rem; border: 1px solid #bbb; border-bottom: 0; cursor: pointer;
             background: #f3f3f3; border-radius: 4px 4px 0 0; }
[role=tab][aria-selected=true] { background: #fff; border-color: #888; font-weight: 700;
                                 box-shadow: 0 2px 0 #fff; }
[role=tab]:focus-visible, button:focus-visible, select:focus-visible, input:focus-visible {
  outline: 3px solid var(--adapter); outline-offset: 1px; }
[role=tabpanel] { padding: .6rem 0; }
.filters { display: flex; flex-wrap: wrap; gap: .4rem 1rem; align-items: center; margin: .6rem 0;
           padding: .4rem .6rem; background: #f7f7f7; border: 1px solid #ddd; }
.filters label, .controls label { white-space: nowrap; }
.controls { display: flex; flex-wrap: wrap; gap: .4rem 1rem; align-items: center; margin: .4rem 0; }
.chart { overflow-x: auto; max-width: 100%; }
.chart svg { display: block; }
svg .grid { stroke: #e3e3e3; } svg .axis { stroke: #777; }
svg .ci { stroke: none; opacity: .18; } svg .line { fill: none; stroke-width: 1.6; }
svg .point { stroke: #fff; stroke-width: 1; }
svg .break { stroke: #000; stroke-dasharray: 4 3; stroke-width: 1.3; }
svg text.break-label { font-size: 10px; fill: #000; }
svg .verdict { font-size: 11px; font-weight: 700; text-anchor: middle; }
.verdict-pass { fill: var(--adapter); color: var(--adapter); }
.verdict-fail { fill: var(--worse); color: var(--worse); }
.verdict-warn { fill: #a86b00; color: #a86b00; }
.verdict-skip, .verdict-unknown { fill: #777; color: #777; }
.c0 { stroke: #E69F00; fill: #E69F00; background: #E69F00; } .c1 { stroke: #0072B2; fill: #0072B2;
  background: #0072B2; } .c2 { stroke: #009E73; fill: #009E73; background: #009E73; }
.c3 { stroke: #CC79A7; fill: #CC79A7; background: #CC79A7; } .c4 { stroke: #56B4E9; fill: #56B4E9;
  background: #56B4E9; } .c5 { stroke: #000; fill: #000; background: #000; }
.legend { display: flex; gap: 1rem; flex-wrap: wrap; font-size: .85rem; margin: .2rem 0; }
.legend .swatch { width: 1.2em; height: .35em; border: 0; }
del { background: #ffd7c2; color: #6b1d00; text-decoration: line-through; }
ins { background: #cde6f7; color: #00304d; text-decoration: underline; }
tr.row-regressed { background: #fff0e8; } tr.row-improved { background: #eaf3fb; }
tr.changed td.changed { box-shadow: inset 4px 0 0 #888; }
table.list { width: 100%; font-size: .85rem; } table.list td.num { text-align: right; white-space: nowrap;
  font-variant-numeric: tabular-nums; }
table.list .out { min-width: 12ch; }
button.more, button.link { font: inherit; cursor: pointer; }
button.more { margin: .4rem 0; }
button.link { background: none; border: 0; padding: 0; color: #0b57a4; text-decoration: underline; }
dl.pair { display: grid; grid-template-columns: max-content 1fr max-content 1fr; gap: .1rem .8rem;
          margin: .3rem 0; font-size: .9rem; }
dl.pair dt { font-weight: 600; } dl.pair dd { margin: 0; font-variant-numeric: tabular-nums; }
.notice { border-left: 5px solid #bbb; background: #f7f7f7; padding: .3rem .6rem; }
.error { border: 3px solid var(--worse); background: #fff3ea; padding: .6rem 1rem; }
"""


def _script_json(payload: Mapping[str, Any]) -> str:
    """The payload as JSON that is safe inside <script type="application/json">: see the module docstring."""
    # allow_nan=False: JSON.parse rejects NaN, so a NaN would blank the whole page; the payload's contract
    # has null for every missing number, and a violation is better reported here, where its cause is.
    text = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    return _UNSAFE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _viewer_js() -> str:
    """viewer.js, read from the installed package (it ships beside this module)."""
    js = resources.files("pytest_llmeval.reporting").joinpath("viewer.js").read_text(encoding="utf-8")
    # The script is inlined verbatim: a "</script" in it (a string, a comment) would end the element early.
    if "</script" in js.lower() or "<!--" in js:
        raise ValueError("viewer.js holds '</script' or '<!--': it cannot be inlined")
    return js


def _header(payload: Mapping[str, Any]) -> tuple[str, list[str]]:
    runs = list(payload.get("runs") or [])
    complete = sum(1 for run in runs if run.get("complete"))
    identities: dict[str, int] = {}
    benchmarks: dict[str, None] = {}
    for run in runs:
        identities[str(run.get("identity"))] = identities.get(str(run.get("identity")), 0) + 1
        benchmarks.update(dict.fromkeys(str(name) for name in run.get("benchmarks") or {}))
    title = f"pytest-llmeval history: {len(runs)} run{'' if len(runs) == 1 else 's'}"
    facts: list[tuple[str, str]] = [
        ("runs", f"{len(runs)} ({complete} complete, {len(runs) - complete} partial)"),
        ("series", "; ".join(f"{name} ({count})" for name, count in identities.items()) or "none"),
        ("benchmarks", ", ".join(benchmarks) or "none"),
    ]
    if runs:
        facts.append(("oldest run", f"{runs[0].get('name')} ({runs[0].get('time') or 'time unknown'})"))
        facts.append(("newest run", f"{runs[-1].get('name')} ({runs[-1].get('time') or 'time unknown'})"))
    facts.append(("generated", str(payload.get("generated") or "?")))
    out = [f"<h1>{_e(title)}</h1>", '<dl class="meta">']
    out += [f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in facts]
    out.append("</dl>")
    return title, out


def render(payload: Mapping[str, Any]) -> str:
    """The viewer: one self-contained HTML document (inline CSS, payload and script) of a viewer payload."""
    if payload.get("version") != PAYLOAD_VERSION:
        raise ValueError(
            f"viewer payload version {payload.get('version')!r}: this page reads version {PAYLOAD_VERSION}"
        )
    title, header = _header(payload)
    js = _viewer_js()
    digest = base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii")
    # Only this page's own script runs (by hash), nothing loads from anywhere: see the module docstring.
    policy = (
        f"default-src 'none'; script-src 'sha256-{digest}'; style-src 'unsafe-inline'; "
        "img-src 'none'; base-uri 'none'; form-action 'none'"
    )
    css = _CSS % {"base": _BASE_COLOUR, "adapter": _ADAPTER_COLOUR, "worse": _WORSE_COLOUR}
    return "\n".join(
        [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{_e(policy)}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            f"<title>{_e(title)}</title>",
            f"<style>{css}{_VIEWER_CSS}</style>",
            "</head>",
            "<body>",
            "<header>",
            *header,
            "</header>",
            '<main id="llmeval-app">',
            "<noscript><p>This page draws its charts and tables with JavaScript; the data is in the "
            "page source, in the script element llmeval-data, as JSON.</p></noscript>",
            "</main>",
            f'<script type="application/json" id="llmeval-data">{_script_json(payload)}</script>',
            f"<script>{js}</script>",
            "</body>",
            "</html>",
            "",
        ]
    )
