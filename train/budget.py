"""How long each SFT row is in the base model's tokens, and which rows a ``max_length`` budget cuts.

trl truncates every tokenized row to ``[train] max_length``. A single-turn row whose prompt alone fills
the budget keeps no completion token: its loss is fully masked, trl drops it, and a run whose rows all
overflow ends in a bare ``num_samples=0`` from the sampler. A row cut inside its completion (or, agentic,
inside its last assistant turns) teaches a truncated file or an episode that never submits. So the rows
are measured with the run's own tokenizer and chat template BEFORE training starts: a row longer than the
budget is left out and named with its length and why, and a run left with no row is one line
(``TrainDataError``) saying what to raise. The same measurement reports the corpus's prompt sizes
(``harvest corpus feed``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from dbt_harvest.train.errors import TrainDataError


@dataclass(frozen=True)
class RowLength:
    """One row in tokens: its prompt (single-turn; the whole conversation for agentic rows) and in all."""

    instance_id: str
    prompt_tokens: int
    total_tokens: int
    chars: int


@dataclass(frozen=True)
class BudgetCut:
    """A row left out of a run, and why."""

    instance_id: str
    total_tokens: int
    prompt_tokens: int
    reason: str

    def line(self) -> str:
        return f"{self.instance_id}: {self.reason}"


def _tokens(tokenizer: Any, messages: list[dict[str, Any]], tools: list[Any] | None, generation: bool) -> int:
    kwargs: dict[str, Any] = {"tokenize": True, "add_generation_prompt": generation}
    if tools:
        kwargs["tools"] = tools
    ids = tokenizer.apply_chat_template(messages, **kwargs)
    if isinstance(ids, dict) or hasattr(ids, "keys"):  # transformers 5 returns a BatchEncoding
        ids = ids["input_ids"]
    return len(ids)


def row_chars(row: dict[str, Any]) -> int:
    """Characters of a row's text (every message's content and tool-call arguments)."""
    messages = list(row.get("prompt", [])) + list(row.get("completion", [])) + list(row.get("messages", []))
    total = 0
    for message in messages:
        total += len(str(message.get("content") or ""))
        for call in message.get("tool_calls") or ():
            total += len(str(call.get("function", {}).get("arguments", "")))
    return total


def measure(rows: Sequence[dict[str, Any]], tokenizer: Any) -> list[RowLength]:
    """Each row's length in ``tokenizer``'s tokens, through its chat template (as trl renders it)."""
    lengths = []
    for row in rows:
        if "messages" in row:
            total = _tokens(tokenizer, row["messages"], row.get("tools"), False)
            prompt = total
        else:
            prompt = _tokens(tokenizer, row["prompt"], None, True)
            total = _tokens(tokenizer, list(row["prompt"]) + list(row["completion"]), None, False)
        lengths.append(RowLength(row["instance_id"], prompt, total, row_chars(row)))
    return lengths


def cut(
    rows: Sequence[dict[str, Any]], lengths: Sequence[RowLength], max_length: int
) -> tuple[list[dict[str, Any]], list[BudgetCut]]:
    """(rows that fit ``max_length``, the rows left out with why)."""
    kept: list[dict[str, Any]] = []
    cuts: list[BudgetCut] = []
    for row, length in zip(rows, lengths, strict=True):
        if length.total_tokens <= max_length:
            kept.append(row)
            continue
        if "messages" in row:
            why = f"{length.total_tokens} tokens > max_length {max_length}: the episode's last turns would be cut"
        elif length.prompt_tokens >= max_length:
            why = (
                f"prompt alone is {length.prompt_tokens} tokens >= max_length {max_length}: "
                "no completion token would be trained"
            )
        else:
            why = (
                f"{length.total_tokens} tokens > max_length {max_length}: the corrected file would be cut "
                f"after {max_length - length.prompt_tokens} of {length.total_tokens - length.prompt_tokens} "
                "completion tokens"
            )
        cuts.append(BudgetCut(length.instance_id, length.total_tokens, length.prompt_tokens, why))
    return kept, cuts


def fit(
    rows: Sequence[dict[str, Any]], tokenizer: Any, max_length: int
) -> tuple[list[dict[str, Any]], list[BudgetCut]]:
    """Rows that fit, the cuts; TrainDataError when no row fits (one line: what to raise or lower)."""
    lengths = measure(rows, tokenizer)
    kept, cuts = cut(rows, lengths, max_length)
    if rows and not kept:
        shortest = min(length.total_tokens for length in lengths)
        raise TrainDataError(
            f"no trainable row: all {len(rows)} rows are longer than [train] max_length = {max_length} tokens "
            f"(the shortest is {shortest}); raise max_length or lower [data] max_file_chars"
        )
    return kept, cuts


def percentiles(values: Sequence[int], points: Sequence[int] = (50, 90, 99, 100)) -> dict[str, int]:
    """Nearest-rank percentiles of ``values`` (``p100`` is the largest); empty for no values."""
    ordered = sorted(values)
    if not ordered:
        return {}
    out = {}
    for point in points:
        rank = max(1, -(-point * len(ordered) // 100))
        out[f"p{point}"] = ordered[rank - 1]
    return out
