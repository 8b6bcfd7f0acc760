"""`harvest spider2 import DIR`: read a checkout once, report every instance, and remember where it is.

The import copies nothing: it reads the checkout (``eval.spider2.checkout``), says for each instance which
part of the committed split it belongs to and whether it can be played (and why not), and records the
checkout's folder and metadata digest in ``$HARVEST_HOME/spider2/checkout.json`` so that `harvest audit
--benchmark spider2-dbt` finds it without ``--spider2``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.eval.spider2.checkout import Checkout, read_checkout
from dbt_harvest.eval.spider2.split import Spider2Split, committed

RECORD = "spider2/checkout.json"


@dataclass(frozen=True)
class ImportReport:
    """What an import found: every instance with its part (None: unscoreable) and its problems."""

    checkout: Checkout
    split: Spider2Split
    benchmark: bool  # the checkout is Spider 2.0-DBT itself (it holds instances the committed split names)

    def part(self, instance_id: str) -> str | None:
        from dbt_harvest.eval.spider2.split import DEV

        return self.split.part_of(instance_id) if self.benchmark else DEV

    def counts(self) -> dict[str, dict[str, int]]:
        out: dict[str, dict[str, int]] = {}
        for instance in self.checkout.instances:
            bucket = out.setdefault(self.part(instance.instance_id) or "unscoreable", {"instances": 0, "playable": 0})
            bucket["instances"] += 1
            bucket["playable"] += instance.playable
        if self.benchmark:
            missing = (set(self.split.dev) | set(self.split.sealed)) - set(self.checkout.by_id())
            for iid in missing:
                out.setdefault(self.split.part_of(iid) or "unscoreable", {"instances": 0, "playable": 0})["instances"] += 1
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.checkout.folder), "metadata_sha256": self.checkout.metadata_sha256,
            "benchmark": self.benchmark, "instances": len(self.checkout.instances), "parts": self.counts(),
            "split_seed": self.split.seed,
            "rows": [{**i.to_dict(), "part": self.part(i.instance_id),
                      "unscoreable": self.split.unscoreable.get(i.instance_id, "") if self.benchmark else ""}
                     for i in self.checkout.instances],
        }


def import_checkout(root: Path, home: Path, aliases: dict[str, str] | None = None) -> ImportReport:
    """Read the checkout at ``root`` and record it under ``home`` (see the module docstring)."""
    from dbt_harvest.core import atomic

    checkout, split = read_checkout(root, aliases), committed()
    report = ImportReport(checkout, split, split.is_benchmark(set(checkout.by_id())))
    record = {"folder": str(checkout.folder), "metadata_sha256": checkout.metadata_sha256,
              "gold_aliases": dict(sorted((aliases or {}).items()))}
    atomic.write_text(home / RECORD, json.dumps(record, sort_keys=True, indent=1) + "\n")
    return report


def recorded_checkout(home: Path | None = None) -> Path | None:
    """The folder the last import recorded (None: no import, or the folder is gone)."""
    from dbt_harvest.core.home import harvest_home

    path = (home or harvest_home()) / RECORD
    try:
        folder = Path(json.loads(path.read_text(encoding="utf-8"))["folder"])
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return folder if folder.is_dir() else None
