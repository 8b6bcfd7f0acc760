"""The mechanical firewall: code that builds training data can only ever be handed train tasks.

Every record carries its split; :func:`require_train` is called by every training-data path (SFT rows,
GRPO prompts, reward tables) and raises on the first dev or test record. With ``pins`` it also checks
the record against the reservation ledger, so a record whose ``split`` field was edited is caught too.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.corpora.errors import FirewallError


def require_train(records: Iterable[TaskRecord], *, pins: Path | None = None) -> list[TaskRecord]:
    """Return the records as a list, or raise FirewallError naming the offenders."""
    items = list(records)
    bad = [r for r in items if not isinstance(r, TaskRecord) or r.split != "train"]
    if bad:
        names = ", ".join(
            f"{getattr(r, 'instance_id', r)!s} ({getattr(r, 'split', type(r).__name__)})" for r in bad[:3]
        )
        raise FirewallError(
            f"{len(bad)} non-train task(s) handed to a training path: {names}; train only on the train split"
        )
    if pins is not None and items:
        from dbt_harvest.core.pin import pin_path, read_pin
        from dbt_harvest.corpora.ledger import SplitLedger

        ledger = SplitLedger.load(pins)
        for record in items:
            found = ledger.assignment(read_pin(pin_path(record.pin, pins)))
            if found is None or found.split != "train":
                raise FirewallError(
                    f"{record.instance_id} says split 'train' but the ledger reserves its repository for "
                    f"{found.split if found else 'no split'}; the record was altered or minted before the reservation"
                )
    return items
