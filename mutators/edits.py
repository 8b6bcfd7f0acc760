"""Edits: splices of replacement text into a file's original text, and their inverses.

An edit never regenerates SQL: it replaces the half-open range [start, end) of the original text by
``replacement`` and leaves every other byte alone, so a mutated model differs from the original only
inside the span and the inverse edit restores the original byte for byte.
"""

from __future__ import annotations

from dataclasses import dataclass


class EditRangeError(ValueError):
    """An edit's range does not fit the text it is applied to; recompute the edit for this text."""


@dataclass(frozen=True)
class Edit:
    """Replace text[start:end] by ``replacement``."""

    start: int
    end: int
    replacement: str

    def __post_init__(self) -> None:
        if not 0 <= self.start <= self.end:
            raise EditRangeError(f"edit range [{self.start}, {self.end}) is not a range")

    def apply(self, text: str) -> str:
        """The text with the span replaced."""
        if self.end > len(text):
            raise EditRangeError(f"edit ends at {self.end} but the text has {len(text)} characters")
        return text[: self.start] + self.replacement + text[self.end :]

    def inverse(self, text: str) -> Edit:
        """The edit over ``self.apply(text)`` that restores ``text`` exactly."""
        if self.end > len(text):
            raise EditRangeError(f"edit ends at {self.end} but the text has {len(text)} characters")
        return Edit(self.start, self.start + len(self.replacement), text[self.start : self.end])

    @property
    def delta(self) -> int:
        """How much longer the text gets."""
        return len(self.replacement) - (self.end - self.start)

    def shift(self, pos: int) -> int:
        """Where an offset of the original text lands in the edited text (positions outside the span)."""
        if pos <= self.start:
            return pos
        if pos >= self.end:
            return pos + self.delta
        raise EditRangeError(f"offset {pos} lies inside the edited span [{self.start}, {self.end})")


def difference(before: str, after: str) -> Edit:
    """The one smallest edit turning ``before`` into ``after`` (their common prefix and suffix kept).

    Two edits applied one after the other (a mutation, then a repair of it) become one edit of the
    original text, usually a replacement where the second alone was a bare insertion; a replacement
    finds its place in compiled SQL without the ambiguity of a point between whitespace.
    """
    limit = min(len(before), len(after))
    prefix = 0
    while prefix < limit and before[prefix] == after[prefix]:
        prefix += 1
    suffix = 0
    while suffix < limit - prefix and before[len(before) - 1 - suffix] == after[len(after) - 1 - suffix]:
        suffix += 1
    return Edit(prefix, len(before) - suffix, after[prefix : len(after) - suffix])


@dataclass(frozen=True)
class WrongRepair(Edit):
    """An edit over the MUTATED text that a person chasing the reported symptom might make, and that is
    still wrong: ``intent`` says in a few words what that person tried (restore the filter with another
    value, coalesce to another default, move the bound the other way…). Which symptom it really fixes and
    which it leaves is measured on built tables by the mint, not declared here."""

    intent: str = ""
