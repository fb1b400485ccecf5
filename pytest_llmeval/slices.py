"""Slices of a benchmark's rows by their tags: `key:value` tags group by key (`domain:film` is slice film of
domain), plain tags are slices of the group "tag"; per slice, each model's mean and the paired comparison.
An adapter that wins overall can lose one category nobody looked at: here it is looked at.

Pure: no pytest, no torch (stats is imported where a comparison is made).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from pytest_llmeval.comparisons import comparison_values
from pytest_llmeval.records import ADAPTER, BASE, score_value
from pytest_llmeval.summaries import _mean

PLAIN_TAGS = "tag"  # the slice group of tags without a key ("edge", "negation")


def slices_of(tags: Iterable[str]) -> list[tuple[str, str]]:
    """A row's slices: `key:value` tags group by key (`domain:film` is slice film of domain), plain tags
    are slices of the group "tag"."""
    out = []
    for tag in tags:
        key, colon, value = tag.partition(":")
        out.append((key, value) if colon and key and value else (PLAIN_TAGS, tag))
    return out


def slice_rows(records: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, list[Mapping[str, Any]]]]:
    """Group -> slice -> the rows tagged so (in the order given)."""
    groups: dict[str, dict[str, list[Mapping[str, Any]]]] = {}
    for record in records:
        for key, value in dict.fromkeys(slices_of(record.get("tags") or [])):
            groups.setdefault(key, {}).setdefault(value, []).append(record)
    return groups


def slice_comparison(
    rows: Sequence[Mapping[str, Any]], alpha: float, column: str = ADAPTER
) -> dict[str, Any]:
    """One slice: its rows, each model's mean, and with two models the paired comparison on its rows."""
    entry: dict[str, Any] = {
        "n": len(rows),
        "base": _mean([s for r in rows if (s := score_value(r, BASE)) is not None]),
        "adapter": _mean([s for r in rows if (s := score_value(r, column)) is not None]),
    }
    adapter, base, bounded, measure = comparison_values(rows, column, BASE)
    if adapter:
        from pytest_llmeval.stats import compare_paired

        cmp = compare_paired(adapter, base, alpha=alpha, bounded=bounded)
        entry.update(
            measure=measure,
            difference=cmp.difference,
            ci_low=cmp.ci_low,
            ci_high=cmp.ci_high,
            test=cmp.test,
            p_value=cmp.p_value,
        )
    return entry


def slices_summary(records: Sequence[Mapping[str, Any]], alpha: float) -> dict[str, Any] | None:
    """Per tag group and slice, the slice's comparison (slice_comparison); None when no row has tags. An
    adapter that wins overall can lose one category nobody looked at: here it is looked at."""
    groups = slice_rows(records)
    if not groups:
        return None
    return {
        key: {value: slice_comparison(rows, alpha) for value, rows in sorted(values.items())}
        for key, values in sorted(groups.items())
    }
