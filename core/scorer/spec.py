"""The grading spec: which gold tables and columns are graded, in Spider 2.0-DBT's metadata shape.

Field names follow the official ``duckdb_match`` parameters so a spec round-trips with a line of
Spider 2.0's ``spider2_eval.jsonl``: ``gold``, ``condition_tabs``, ``condition_cols``, ``ignore_orders``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


class SpecFormatError(ValueError):
    """A grading spec is malformed: the lists disagree in length or hold the wrong types."""


@dataclass(frozen=True)
class GradingSpec:
    gold: str
    condition_tabs: tuple[str, ...]
    condition_cols: tuple[tuple[int, ...], ...]
    ignore_orders: tuple[bool, ...]

    def __post_init__(self) -> None:
        n = len(self.condition_tabs)
        if n == 0:
            raise SpecFormatError("grading spec has no condition_tabs")
        if len(self.condition_cols) != n or len(self.ignore_orders) != n:
            raise SpecFormatError(
                f"grading spec lists disagree: {n} condition_tabs, {len(self.condition_cols)} "
                f"condition_cols, {len(self.ignore_orders)} ignore_orders"
            )
        for cols in self.condition_cols:
            if any(not isinstance(c, int) or isinstance(c, bool) or c < 0 for c in cols):
                raise SpecFormatError(f"condition_cols must be non-negative ints, got {list(cols)}")

    def to_dict(self) -> dict[str, Any]:
        return {
            "gold": self.gold,
            "condition_tabs": list(self.condition_tabs),
            "condition_cols": [list(c) for c in self.condition_cols],
            "ignore_orders": list(self.ignore_orders),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> GradingSpec:
        try:
            tabs = data["condition_tabs"]
            n = len(tabs)
            cols = data.get("condition_cols") or [[] for _ in range(n)]
            orders = data.get("ignore_orders") or [True for _ in range(n)]
            return cls(
                gold=str(data.get("gold", "")),
                condition_tabs=tuple(str(t) for t in tabs),
                condition_cols=tuple(tuple(c) for c in cols),
                ignore_orders=tuple(bool(o) for o in orders),
            )
        except (KeyError, TypeError) as exc:
            raise SpecFormatError(f"malformed grading spec: {exc}") from None
