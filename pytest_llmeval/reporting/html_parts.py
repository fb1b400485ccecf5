"""What every part of the HTML page shares: escaping, the colour palette, a captioned table, a number or the
dash.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from typing import Any

from pytest_llmeval.formatting import MISSING

# Okabe-Ito colours (distinguishable with the common colour-vision deficiencies); the base's bars are
# hatched as well, and every gate status carries a word and a symbol, so nothing relies on colour alone.
_BASE_COLOUR = "#E69F00"
_ADAPTER_COLOUR = "#0072B2"
_WORSE_COLOUR = "#D55E00"
_SAME_COLOUR = "#8c8c8c"


def _e(value: object) -> str:
    return html.escape(str(value), quote=True)


def _kv_table(caption: str, header: Sequence[str], rows: Iterable[Sequence[object]]) -> list[str]:
    out = [f"<table><caption>{_e(caption)}</caption><thead><tr>"]
    out += [f'<th scope="col">{_e(h)}</th>' for h in header]
    out.append("</tr></thead><tbody>")
    for row in rows:
        out.append("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>")
    out.append("</tbody></table>")
    return out


def _num(value: Any, fmt: str = ".3f") -> str:
    return MISSING if value is None else format(float(value), fmt)
