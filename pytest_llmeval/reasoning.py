"""Reasoning before the answer: a `<think> ... </think>` block that reasoning models write first.

Pure, standard library only. The evaluator scores what follows the block and keeps the raw output in
results.json (lighteval #869: a reasoning model's thoughts scored as its answer). An output that opens a block
and never closes it (the model ran out of tokens while thinking) has no answer: it scores "" and counts as
unparsed, apart from wrong answers.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DEFAULT_TAGS", "Split", "parse_tags", "split_reasoning"]

DEFAULT_TAGS = ("<think>", "</think>")


@dataclass(frozen=True)
class Split:
    """An output cut into its reasoning and its answer."""

    answer: str  # what is scored: the text after the block, or the whole output without a block
    reasoning: str | None  # the block's content; None when the output does not open with one
    unterminated: bool = False  # the block never closed: no answer at all

    @property
    def stripped(self) -> bool:
        return self.reasoning is not None


def split_reasoning(text: str, tags: tuple[str, str] = DEFAULT_TAGS) -> Split:
    """Split `text` when it opens (after whitespace) with the opening tag: the answer is what follows the
    first closing tag, without the whitespace around it; only a leading block counts, so a tag quoted in
    the middle of an answer is left alone."""
    opening, closing = tags
    body = text.lstrip()
    if not body.startswith(opening):
        return Split(answer=text, reasoning=None)
    rest = body[len(opening) :]
    end = rest.find(closing)
    if end < 0:
        return Split(answer="", reasoning=rest, unterminated=True)
    return Split(answer=rest[end + len(closing) :].strip(), reasoning=rest[:end])


def parse_tags(value: str) -> tuple[str, str]:
    """`--llmeval-reasoning-tags OPEN,CLOSE` -> (OPEN, CLOSE); ValueError names what is wrong."""
    parts = value.split(",")
    if len(parts) != 2 or not all(p.strip() for p in parts):
        raise ValueError(f"expected OPEN,CLOSE (two non-empty tags, e.g. '<think>,</think>'), got {value!r}")
    opening, closing = (p.strip() for p in parts)
    if opening == closing:
        raise ValueError(f"the opening and closing tags must differ, got {value!r} twice the same")
    return opening, closing
