"""The interference matrix: its terminal table (formatting.matrix_lines) and its HTML heatmap
(reporting/html_matrix.py)."""

from __future__ import annotations

import copy
import re
from html.parser import HTMLParser
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_report import check_self_contained, document, html_text, parse, row

from pytest_llmeval.formatting import (
    CROSS_ENTROPY_MEASURE,
    MATRIX_LEGEND,
    MATRIX_TITLE,
    MISSING,
    REFERENCE_NOTE,
    SCORE_MEASURE,
    benchmark_labels,
    matrix_lines,
)
from pytest_llmeval.reporting.html import html_report
from pytest_llmeval.reporting.html_matrix import change_colour, text_colour

GAIN, LOSS, NEUTRAL = "#2166ac", "#b35806", "#f7f7f7"
HOSTILE_NAME = "<script>alert(1)</script>"

# Two adapters, one plain model, one reference; three benchmarks, the last compared on cross-entropy. The
# largest score change is a gain (+70 pt) and the largest cross-entropy change a loss (-0.050 nats): each
# measure is coloured against its own largest change, so both reach their end colour.
MATRIX: dict[str, Any] = {
    "benchmarks": ["benchmarks/dates.jsonl", "benchmarks/sentiment.jsonl", "corpora/wiki.jsonl"],
    "measures": [SCORE_MEASURE, SCORE_MEASURE, CROSS_ENTROPY_MEASURE],
    "base": [0.10, 0.55, -3.5],
    "models": [
        {
            "name": "date-iso",
            "kind": "adapter",
            "values": [0.80, 0.53, -3.52],
            "change": [0.70, -0.02, -0.02],
            "domain": ["in", "out", "out"],
            "n": [60, 60, 40],
        },
        {
            "name": "sentiment",
            "kind": "adapter",
            "values": [0.10, 0.75, -3.55],
            "change": [0.0, 0.20, -0.05],
            "domain": ["out", "in", "out"],
            "n": [60, 60, 40],
        },
        {
            "name": HOSTILE_NAME,
            "kind": "model",
            "values": [0.12, None, -3.49],
            "change": [0.02, None, 0.01],
            "domain": [None, None, None],
            "n": [60, 0, 40],
        },
        {
            "name": "frontier",
            "kind": "reference",
            "values": [0.60, 0.85, -3.47],
            "change": [0.50, 0.30, 0.03],
            "domain": [None, None, None],
            "n": [60, 60, 40],
        },
    ],
}


def table_of(lines: list[str]) -> list[str]:
    """The table's lines of matrix_lines: after the title, before the legend (header, base, one per model)."""
    assert lines[0] == MATRIX_TITLE
    return lines[1 : 3 + len(MATRIX["models"])]


# ---------------------------------------------------------------------------------------------------------
# The terminal table


def test_text_table_rows_columns_and_marks() -> None:
    header, base, date_iso, sentiment, hostile, frontier = table_of(matrix_lines(MATRIX))
    assert header.split() == ["model", "kind", "dates.jsonl", "sentiment.jsonl", "wiki.jsonl"]
    assert base.split()[0] == "base"
    assert re.search(r"10\.0%\s+55\.0%\s+-3\.500 nats/token", base)
    assert date_iso.startswith("date-iso ") and " adapter " in date_iso
    assert re.search(r"\+70\.0 pt \*\s+-2\.0 pt\s+-0\.020 nats/token\s*$", date_iso)
    assert re.search(r"\+0\.0 pt\s+\+20\.0 pt \*\s+-0\.050 nats/token\s*$", sentiment)
    # No row with both scores: the missing mark; cross-entropy in nats, never points.
    assert hostile.startswith(HOSTILE_NAME) and " model " in hostile
    assert re.search(rf"\+2\.0 pt\s+{MISSING}\s+\+0\.010 nats/token\s*$", hostile)
    assert " reference " in frontier and "*" not in frontier
    # Only the adapters' own benchmarks are marked.
    assert [line.count("*") for line in (base, date_iso, sentiment, hostile, frontier)] == [0, 1, 1, 0, 0]


def test_text_table_is_aligned() -> None:
    table = table_of(matrix_lines(MATRIX))
    assert len({len(line) for line in table}) == 1
    header, _, date_iso, sentiment, *_ = table
    # A number's last digit sits under its column name's last character, marked or not.
    dates_end = header.index("dates.jsonl") + len("dates.jsonl")
    assert date_iso.index("+70.0 pt") + len("+70.0 pt") == dates_end
    assert sentiment.index("+0.0 pt") + len("+0.0 pt") == dates_end
    wiki_end = header.index("wiki.jsonl") + len("wiki.jsonl")
    assert date_iso.index("-0.020 nats/token") + len("-0.020 nats/token") == wiki_end


def test_text_legend_and_reference_note() -> None:
    lines = matrix_lines(MATRIX)
    assert lines[-2:] == [MATRIX_LEGEND, REFERENCE_NOTE]
    assert MATRIX_LEGEND.startswith("* in-domain (the adapter's own benchmark)")
    # Without a reference model there is nothing to explain about one.
    without = copy.deepcopy(MATRIX)
    without["models"] = without["models"][:2]
    assert matrix_lines(without)[-1] == MATRIX_LEGEND


@pytest.mark.parametrize("matrix", [None, {}, {**MATRIX, "models": []}])
def test_text_nothing_for_no_matrix(matrix: dict[str, Any] | None) -> None:
    assert matrix_lines(matrix) == []


def test_column_names_are_base_names_unless_two_clash() -> None:
    assert benchmark_labels(["benchmarks/dates.jsonl", "x.jsonl"]) == ["dates.jsonl", "x.jsonl"]
    assert benchmark_labels(["a/x.jsonl", "b/x.jsonl", "c/y.jsonl"]) == ["a/x.jsonl", "b/x.jsonl", "y.jsonl"]


# ---------------------------------------------------------------------------------------------------------
# The HTML heatmap


class MatrixTable(HTMLParser):
    """The cells of <table class="matrix">: per row, its attributes and (attributes, text) of each cell."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.inside = False
        self.rows: list[tuple[dict[str, str | None], list[tuple[dict[str, str | None], str]]]] = []
        self.cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table" and dict(attrs).get("class") == "matrix":
            self.inside = True
        elif self.inside and tag == "tr":
            self.rows.append((dict(attrs), []))
        elif self.inside and tag in ("td", "th"):
            self.rows[-1][1].append((dict(attrs), ""))
            self.cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "table":
            self.inside = False
        elif self.inside and tag in ("td", "th") and self.cell is not None:
            attrs, _ = self.rows[-1][1][-1]
            self.rows[-1][1][-1] = (attrs, " ".join("".join(self.cell).split()))
            self.cell = None

    def handle_data(self, data: str) -> None:
        if self.cell is not None:
            self.cell.append(data + " ")


def matrix_table(page: str) -> MatrixTable:
    parser = MatrixTable()
    parser.feed(page)
    parser.close()
    return parser


def with_matrix(matrix: dict[str, Any] | None) -> str:
    """The HTML page of a small real document (two benchmarks) with `matrix` as its matrix."""
    doc = document([row("benchmarks/dates.jsonl", "x", 0.0, 1.0), row("corpora/wiki.jsonl", "y", 1.0, 1.0)])
    doc["matrix"] = matrix  # None: as a document of a base-only run has it
    return html_report(doc)


def cell(table: MatrixTable, model: str, column: int) -> tuple[dict[str, str | None], str]:
    """A model's cell in benchmark column `column` (0-based; the name and kind cells come first)."""
    for _, cells in table.rows:
        if cells and cells[0][1] == model:
            return cells[2 + column]
    raise AssertionError(f"no row for {model}")


def background(attrs: dict[str, str | None]) -> str:
    found = re.search(r"background-color:\s*(#[0-9a-f]{6})", attrs.get("style") or "")
    assert found, attrs
    return found.group(1)


def test_html_section_after_the_header_before_the_benchmarks() -> None:
    page = with_matrix(MATRIX)
    parsed = parse(page)
    check_self_contained(parsed)
    assert '<h2 id="interference-matrix-h">Interference matrix</h2>' in page
    assert page.index("</header>") < page.index('id="interference-matrix"') < page.index('<section id="b0-')
    table = matrix_table(page)
    header = [text for _, text in table.rows[0][1]]
    assert header[:2] == ["model", "kind"]
    assert [h.split()[0] for h in header[2:]] == ["dates.jsonl", "sentiment.jsonl", "wiki.jsonl"]
    # Columns link to the benchmark's own section where the page has one.
    assert '<a href="#b0-benchmarks-dates-jsonl">dates.jsonl</a>' in page
    assert [text for _, text in table.rows[1][1]] == [
        "base",
        "base model",
        "10.0%",
        "55.0%",
        "-3.500 nats/token",
    ]
    assert [attrs.get("class") for attrs, _ in table.rows[1:]] == [
        "base",
        "adapter",
        "adapter",
        "model",
        "reference",
    ]
    # The value is printed in every cell, colour or not; a cell without both scores reads as missing.
    assert cell(table, "date-iso", 0)[1] == "+70.0 pt * 80.0%"
    assert cell(table, "date-iso", 2)[1] == "-0.020 nats/token -3.520 nats/token"
    assert cell(table, HOSTILE_NAME, 1)[1] == MISSING
    assert "style" not in cell(table, HOSTILE_NAME, 1)[0]
    text = html_text(page)
    assert MATRIX_LEGEND in text and "full colour at the largest change of each measure" in text


@pytest.mark.parametrize("matrix", [None, {**MATRIX, "models": []}])
def test_html_without_a_matrix_has_no_section(matrix: dict[str, Any] | None) -> None:
    page = with_matrix(matrix)
    parsed = parse(page)
    check_self_contained(parsed)
    assert "Interference matrix" not in page and 'class="matrix"' not in page
    assert '<section id="b0-' in page  # the rest of the page is still there


def test_html_escapes_a_hostile_model_name() -> None:
    page = with_matrix(MATRIX)
    parsed = parse(page)
    assert [t for t, _ in parsed.tags].count("script") == 1  # the page's own
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert HOSTILE_NAME in html_text(page)


def test_html_colours_scale_per_measure_to_the_largest_change() -> None:
    table = matrix_table(with_matrix(MATRIX))
    assert background(cell(table, "date-iso", 0)[0]) == GAIN  # +70 pt: the largest score change
    assert background(cell(table, "sentiment", 2)[0]) == LOSS  # -0.050 nats: the largest cross-entropy one
    assert background(cell(table, "sentiment", 0)[0]) == NEUTRAL  # no change
    # The full colours carry white text, the near-white black.
    assert "color: #ffffff" in (cell(table, "date-iso", 0)[0].get("style") or "")
    assert "color: #000000" in (cell(table, "sentiment", 0)[0].get("style") or "")
    # A small loss is a pale orange: redder than it is blue, close to white.
    r, g, b = (int(background(cell(table, "date-iso", 1)[0])[i : i + 2], 16) for i in (1, 3, 5))
    assert r > b and min(r, g, b) > 200


def test_html_in_domain_cells_are_outlined_and_marked() -> None:
    page = with_matrix(MATRIX)
    table = matrix_table(page)
    outlined = [
        (cells[0][1], i)
        for _, cells in table.rows
        for i, (attrs, _) in enumerate(cells[2:])
        if "in-domain" in (attrs.get("class") or "").split()
    ]
    assert outlined == [("date-iso", 0), ("sentiment", 1)]
    assert all("*" in cell(table, name, i)[1] for name, i in outlined)
    assert "table.matrix td.in-domain { outline:" in page


def test_html_reference_row_is_marked() -> None:
    page = with_matrix(MATRIX)
    table = matrix_table(page)
    attrs, cells = table.rows[-1]
    assert attrs.get("class") == "reference"
    assert [text for _, text in cells[:2]] == ["frontier", REFERENCE_NOTE]
    assert "table.matrix tr.reference th, table.matrix tr.reference td { font-style: italic; }" in page
    assert f"Italic rows: {REFERENCE_NOTE}." in html_text(page)


# ---------------------------------------------------------------------------------------------------------
# The colour scale


def rgb(colour: str) -> tuple[int, int, int]:
    return int(colour[1:3], 16), int(colour[3:5], 16), int(colour[5:7], 16)


def share_toward(colour: str, end: str) -> float:
    """How far `colour` is from the neutral toward `end`, 0 to 1, along the channel that moves most."""
    spans = [e - n for n, e in zip(rgb(NEUTRAL), rgb(end), strict=True)]
    channel = max(range(3), key=lambda i: abs(spans[i]))
    return (rgb(colour)[channel] - rgb(NEUTRAL)[channel]) / spans[channel]


def between(colour: str, end: str) -> bool:
    """Every channel of `colour` lies between the neutral's and `end`'s."""
    return all(
        min(n, e) <= c <= max(n, e) for c, n, e in zip(rgb(colour), rgb(NEUTRAL), rgb(end), strict=True)
    )


def contrast(a: str, b: str) -> float:
    """WCAG 2 contrast ratio, written here apart from html_matrix.py's: the test is an independent check."""

    def lum(colour: str) -> float:
        chans = [(c / 255 / 12.92) if c <= 10 else ((c / 255 + 0.055) / 1.055) ** 2.4 for c in rgb(colour)]
        return 0.2126 * chans[0] + 0.7152 * chans[1] + 0.0722 * chans[2]

    high, low = sorted((lum(a), lum(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


magnitudes = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
scales = st.floats(min_value=1e-6, max_value=10.0, allow_nan=False)


@given(magnitudes, magnitudes, scales)
def test_colour_moves_toward_its_end_as_the_change_grows(a: float, b: float, scale: float) -> None:
    small, large = sorted((a, b))
    for sign, end in ((1, GAIN), (-1, LOSS)):
        near, far = change_colour(sign * small, scale), change_colour(sign * large, scale)
        assert between(near, end) and between(far, end)
        for n, x, y in zip(rgb(NEUTRAL), rgb(near), rgb(far), strict=True):
            assert abs(x - n) <= abs(y - n)
    assert change_colour(scale * 2, scale) == GAIN and change_colour(-scale * 2, scale) == LOSS


@given(magnitudes, scales)
def test_gain_and_loss_of_one_size_are_equally_far_toward_their_ends(size: float, scale: float) -> None:
    gain, loss = change_colour(size, scale), change_colour(-size, scale)
    # The hue comes from the sign alone: a gain is never on the orange side, a loss never on the blue.
    assert between(gain, GAIN) and between(loss, LOSS)
    # The same share of the way (up to rounding to whole channel values: half a step of the shorter span).
    assert (
        abs(share_toward(gain, GAIN) - share_toward(loss, LOSS)) <= 0.5 / 214 + 0.5 / 241 + 1e-9
    )  # the spans of the red and blue channels


@given(st.floats(min_value=-1.0, max_value=1.0, allow_nan=False))
def test_the_text_on_every_colour_of_the_scale_is_readable(change: float) -> None:
    colour = change_colour(change, 1.0)
    chosen = text_colour(colour)
    other = "#000000" if chosen == "#ffffff" else "#ffffff"
    assert contrast(chosen, colour) >= contrast(other, colour)
    assert contrast(chosen, colour) >= 4.5  # WCAG AA for normal text


def test_colour_scale_is_linear_and_neutral_without_a_change() -> None:
    # Half the largest change is half the way to the end colour (up to rounding to whole channel values).
    assert share_toward(change_colour(0.35, 0.7), GAIN) == pytest.approx(0.5, abs=0.5 / 214)
    assert share_toward(change_colour(-0.35, 0.7), LOSS) == pytest.approx(0.5, abs=0.5 / 241)
    assert change_colour(0.0, 1.0) == NEUTRAL
    assert change_colour(0.3, 0.0) == NEUTRAL  # every change of the measure is 0
    assert change_colour(float("nan"), 1.0) == NEUTRAL
