"""How numbers read, once for every report: percents, percent points, p-values, test names, measures,
and the interference matrix as a terminal table.

Pure, standard library only: the terminal table, the spot check, the HTML page, the GitHub summary and the
verdict messages of gates and stats all format a share, a p-value or a test's name with these, so the same
number never reads two ways in two places.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from types import MappingProxyType
from typing import Any

# What a missing value reads as: an en dash, which no number starts with.
MISSING = "–"

# The comparison measures results.json names (comparisons.comparison_values says which a benchmark uses).
# Scores are shares of 1, shown in percent; cross-entropy is in nats per token.
SCORE_MEASURE = "score"
CROSS_ENTROPY_MEASURE = "negative cross-entropy (nats per token) of each text"

TEST_NAMES: Mapping[str, str] = MappingProxyType(
    {"mcnemar_exact": "McNemar exact", "paired_t": "paired t-test"}
)


# Characters of one text (an output, an expected output, a prompt) a failure report shows: as the spot
# check, enough to see what went wrong; a 1 MB output is not printed whole (results.json keeps all of it).
TEXT_SHOWN = 1200


def shown(text: str, limit: int = TEXT_SHOWN) -> str:
    """`text` as a failure report quotes it (repr), cut at `limit` characters with how much was left out."""
    if len(text) <= limit:
        return repr(text)
    return f"{text[:limit]!r} … {len(text) - limit} more characters (all of it in results.json)"


def percent(share: float | None, digits: int = 1, *, missing: str = MISSING) -> str:
    """A share of 1 as a percent with fixed decimals: `85.0%`; `missing` for None."""
    return missing if share is None else f"{100 * share:.{digits}f}%"


def level(share: float) -> str:
    """A share as a percent with only the digits it has: `95%`, `99.5%` (confidence levels, targets)."""
    # round: 0.95 * 100 is 94.99999999999999 in binary floating point.
    return f"{round(share * 100, 6):g}%"


def points(difference: float | None, digits: int = 1, *, missing: str = MISSING) -> str:
    """A difference of two shares in percent points, signed: `+78.3 pt`; `missing` for None."""
    return missing if difference is None else f"{100 * difference:+.{digits}f} pt"


def p_value(p: float | None, alpha: float | None = None, *, missing: str = MISSING) -> str:
    """`0.049`, `1.4e-14`: two significant digits, more only where rounding would cross alpha."""
    if p is None or (isinstance(p, float) and math.isnan(p)):
        return missing
    if alpha is None:
        return f"{p:.2g}"
    # 0.0496 shown as "0.05" next to "< 0.05" reads as a contradiction: add digits until the shown value
    # falls on the same side of alpha as the real one.
    for digits in range(2, 17):
        shown = f"{p:.{digits}g}"
        if (float(shown) < alpha) == (p < alpha):
            return shown
    return repr(p)


def name_of_test(test: str) -> str:
    """A significance test's name for people (`mcnemar_exact` -> `McNemar exact`); unknown names as given."""
    return TEST_NAMES.get(test, test)


def measure_unit(measure: str) -> str:
    """What a comparison measure is, in a few words: `score`, `negative cross-entropy (higher is better)`."""
    if measure == SCORE_MEASURE:
        return "score"
    if measure == CROSS_ENTROPY_MEASURE:
        return "negative cross-entropy (higher is better)"
    return measure


def measure_value(value: float | None, measure: str, *, missing: str = MISSING) -> str:
    """A value of a comparison measure: a score as `85.0%`, cross-entropy as `-3.589 nats/token`."""
    if value is None:
        return missing
    if measure == SCORE_MEASURE:
        return percent(value)
    if measure == CROSS_ENTROPY_MEASURE:
        return f"{value:.3f} nats/token"
    return f"{value:.4g}"


def measure_difference(value: float | None, measure: str, *, missing: str = MISSING) -> str:
    """A difference in a comparison measure: scores in percent points (`-6.7 pt`), cross-entropy in nats
    per token (`-0.047 nats/token`), never points."""
    if value is None:
        return missing
    if measure == SCORE_MEASURE:
        return points(value)
    if measure == CROSS_ENTROPY_MEASURE:
        return f"{value:+.3f} nats/token"
    return f"{value:+.4g}"


def measure_interval(low: float | None, high: float | None, measure: str) -> str:
    """A confidence interval of a difference, unit once at the end: `+68.3 to +88.3 pt`."""
    if low is None or high is None:
        return MISSING
    if measure == SCORE_MEASURE:
        return f"{100 * low:+.1f} to {100 * high:+.1f} pt"
    if measure == CROSS_ENTROPY_MEASURE:
        return f"{low:+.3f} to {high:+.3f} nats/token"
    return f"{low:+.4g} to {high:+.4g}"


def out_of_domain(figure: Mapping[str, Any]) -> str:
    """An out_of_domain figure of results.json in one line, in its measure's own unit (never points for
    cross-entropy): `score: adapter 83.3% vs base 85.0%, degradation (adapter − base) -1.7 pt, 60 rows`."""
    measure = str(figure.get("measure", SCORE_MEASURE))
    text = (
        f"{measure_unit(measure)}: adapter {measure_value(figure.get('adapter_score'), measure)} vs base "
        f"{measure_value(figure.get('base_model_score'), measure)}, degradation (adapter − base) "
        f"{measure_difference(figure.get('degradation'), measure)}, {figure.get('n_rows')} rows"
    )
    if figure.get("verdict"):
        text += f"; no_degradation {figure['verdict']}"
    return text


def composite_value(entry: Mapping[str, Any] | None) -> str:
    """One model's composite score (0-100) as `89.98`, or why there is none: `none (missing ...)`."""
    if not entry:
        return MISSING
    if entry.get("value") is None:
        return f"none ({entry.get('reason') or 'no reason recorded'})"
    return f"{float(entry['value']):.2f}"


# The interference matrix (results.json's `matrix`): what marks a cell and what a reference row is, worded
# once for the terminal table and the HTML page.
IN_DOMAIN_MARK = "*"
MATRIX_LEGEND = (
    f"{IN_DOMAIN_MARK} in-domain (the adapter's own benchmark); other cells: out-of-domain change against "
    "the base"
)
REFERENCE_NOTE = "reference: upper bound, not gated"
MATRIX_TITLE = (
    "interference matrix: each model's change against the base, on the rows both scored "
    "(base row: the base's own values)"
)


def benchmark_labels(benchmarks: Sequence[str]) -> list[str]:
    """Column names for benchmark files: base names (`dates.jsonl`), whole paths where base names clash."""
    names = [PurePosixPath(b).name or b for b in benchmarks]
    # a/x.jsonl and b/x.jsonl both read `x.jsonl`: two columns of one name would be read as one benchmark.
    return [b if names.count(n) > 1 else n for b, n in zip(benchmarks, names, strict=True)]


def matrix_lines(matrix: Mapping[str, Any] | None) -> list[str]:
    """The interference matrix as a terminal table: a title, one row per model (the base first), one column
    per benchmark, each cell the change against the base in its measure's unit, then the legend."""
    if not matrix or not matrix.get("models"):
        return []
    measures = [str(m) for m in matrix["measures"]]
    # Every value cell ends in a two-character slot, the in-domain mark or blanks, so that right-aligned
    # numbers line up whether marked or not.
    blank = " " * (len(IN_DOMAIN_MARK) + 1)
    table = [
        [
            "model",
            "kind",
            *(label + blank for label in benchmark_labels([str(b) for b in matrix["benchmarks"]])),
        ],
        ["base", "", *(measure_value(v, m) + blank for v, m in zip(matrix["base"], measures, strict=True))],
    ]
    for model in matrix["models"]:
        cells = [str(model["name"]), str(model["kind"])]
        for change, measure, domain in zip(model["change"], measures, model["domain"], strict=True):
            slot = f" {IN_DOMAIN_MARK}" if domain == "in" else blank
            cells.append(measure_difference(change, measure) + slot)
        table.append(cells)
    widths = [max(len(row[i]) for row in table) for i in range(len(table[0]))]
    lines = [MATRIX_TITLE]
    for row in table:
        # Names left-aligned, numbers right-aligned; every cell padded, so every line has the same width.
        names = [row[i].ljust(widths[i]) for i in (0, 1)]
        values = [cell.rjust(width) for cell, width in zip(row[2:], widths[2:], strict=True)]
        lines.append("  ".join([*names, *values]))
    lines.append(MATRIX_LEGEND)
    if any(model["kind"] == "reference" for model in matrix["models"]):
        lines.append(REFERENCE_NOTE)
    return lines


# Spike steps a training summary lists before it says how many more there are.
_SPIKES_LISTED = 5


def steps_list(steps: Sequence[int], limit: int = _SPIKES_LISTED) -> str:
    """`26, 30 and 41`, or the first `limit` steps and `and 7 more`."""
    shown = [str(s) for s in steps[:limit]]
    if len(steps) > limit:
        return f"{', '.join(shown)} and {len(steps) - limit} more"
    return " and ".join([", ".join(shown[:-1]), shown[-1]]) if len(shown) > 1 else "".join(shown)


def training_summary(entry: Mapping[str, Any]) -> str:
    """A column's results.json `training` in one line: final loss, convergence step, overfitting onset and
    gradient spikes, as the terminal summary and the HTML report both say it."""
    final = entry.get("final_loss")
    converged = entry.get("convergence_step")
    overfitting = entry.get("overfitting") or {}
    spikes = list((entry.get("grad_norm") or {}).get("spikes") or [])
    if overfitting.get("detected"):
        overfit = f"overfitting from step {overfitting['onset_step']}"
    elif overfitting.get("best_step") is None:
        overfit = "no eval loss logged"
    else:
        overfit = "no overfitting detected"
    if spikes:
        spiked = f"gradient spike{'s' if len(spikes) > 1 else ''} at step{'s' if len(spikes) > 1 else ''} "
        spiked += steps_list(spikes)
    else:
        spiked = "no gradient spikes"
    parts = [
        f"final loss {MISSING if final is None else format(float(final), '.4g')}",
        f"converged at step {converged}" if converged is not None else "not converged",
        overfit,
        spiked,
    ]
    return f"{', '.join(parts)} ({entry.get('n_steps')} steps)"


# --- Markdown (the spot check, the step summary, the PEFT against SFT report) ---------------------------

# Characters Markdown (CommonMark + GFM tables) may read as syntax inside a line of text.
_MD_SPECIAL = re.compile(r"([\\`*_\[\]<|~&#!])")


def md_escape(text: str) -> str:
    """Text safe inside a Markdown paragraph or table cell: syntax characters escaped, newlines as <br>."""
    escaped = _MD_SPECIAL.sub(r"\\\1", text)
    return "<br>".join(escaped.replace("\r\n", "\n").replace("\r", "\n").split("\n"))


def md_block(text: str, language: str = "") -> str:
    """A fenced code block holding `text` verbatim: the fence is longer than any backtick run inside."""
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"


def md_code(text: str) -> str:
    """A code span for names (paths, ids): verbatim when it can be, else escaped text."""
    if "`" in text or "\n" in text or "|" in text or not text.strip():
        return md_escape(text)
    return f"`{text}`"
