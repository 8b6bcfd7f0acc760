"""`harvest spider2 import DIR`: read a checkout once, report every instance, and remember where it is.

The import copies nothing of the checkout: it reads it (``eval.spider2.checkout``), says for each instance
which part of the committed split it belongs to and whether it can be played (and why not), and records the
checkout's folder and metadata digest in ``$HARVEST_HOME/spider2/checkout.json`` so that `harvest audit
--benchmark spider2-dbt` finds it without ``--spider2``.

Packages: an example whose ``packages.yml`` is not installed whole in ``dbt_packages/`` (the benchmark's
harness runs `dbt deps` with a network; measured on the benchmark's 68 projects at e12c5f1e: five ship no
``dbt_packages`` and two ship git submodules that a plain clone leaves empty) has its packages resolved here
by the harvester's own resolver (the dbt hub and git, or ``--package-mirror`` offline) to exact commits,
mirrored under ``$HARVEST_HOME/mirrors``; the record lists them, and every workspace of the instance gets
them vendored, as `dbt deps` would install them (episodes have no network). One that cannot be resolved
cannot be played, with the resolver's reason.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.pin import PackageRecord
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
                out.setdefault(self.split.part_of(iid) or "unscoreable", {"instances": 0, "playable": 0})[
                    "instances"
                ] += 1
        return dict(sorted(out.items()))

    def to_dict(self) -> dict[str, Any]:
        return {
            "folder": str(self.checkout.folder),
            "metadata_sha256": self.checkout.metadata_sha256,
            "benchmark": self.benchmark,
            "instances": len(self.checkout.instances),
            "parts": self.counts(),
            "split_seed": self.split.seed,
            "rows": [
                {
                    **i.to_dict(),
                    "part": self.part(i.instance_id),
                    "unscoreable": self.split.unscoreable.get(i.instance_id, "") if self.benchmark else "",
                }
                for i in self.checkout.instances
            ],
        }


def resolve_missing(
    checkout: Checkout, package_mirror: Path | None = None, network: bool | None = None
) -> dict[str, tuple[PackageRecord, ...] | str]:
    """For every instance whose packages are not installed: its packages resolved to exact commits (mirrored
    under HARVEST_HOME), or why they cannot be."""
    from dbt_harvest.core.errors import HarvestError
    from dbt_harvest.core.home import mirrors_dir
    from dbt_harvest.harvester.gitstore import GitStore
    from dbt_harvest.harvester.packages.resolver import resolve_packages
    from dbt_harvest.harvester.packages.sources import load_mirror

    mirror = load_mirror(package_mirror)
    store = GitStore(mirrors_dir())
    out: dict[str, tuple[PackageRecord, ...] | str] = {}
    for instance in checkout.instances:
        if not instance.needs_packages:
            continue
        try:
            out[instance.instance_id] = resolve_packages(
                instance.example / instance.project_dir, store, mirror, network=network, tree=instance.example
            )
        except HarvestError as exc:
            out[instance.instance_id] = " ".join(str(exc).split())[:300]
    return out


def import_checkout(
    root: Path,
    home: Path,
    aliases: dict[str, str] | None = None,
    *,
    package_mirror: Path | None = None,
    network: bool | None = None,
) -> ImportReport:
    """Read the checkout at ``root``, resolve the packages it lacks, and record both under ``home`` (see the
    module docstring)."""
    from dbt_harvest.core import atomic

    packages = resolve_missing(read_checkout(root, aliases), package_mirror, network)
    checkout, split = read_checkout(root, aliases, packages), committed()
    report = ImportReport(checkout, split, split.is_benchmark(set(checkout.by_id())))
    record = {
        "folder": str(checkout.folder),
        "metadata_sha256": checkout.metadata_sha256,
        "gold_aliases": dict(sorted((aliases or {}).items())),
        "packages": {
            iid: [asdict(r) for r in found] for iid, found in sorted(packages.items()) if not isinstance(found, str)
        },
    }
    atomic.write_text(home / RECORD, json.dumps(record, sort_keys=True, indent=1) + "\n")
    return report


def _record(home: Path | None) -> dict[str, Any]:
    from dbt_harvest.core.home import harvest_home

    try:
        data = json.loads(((home or harvest_home()) / RECORD).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def recorded_packages(folder: Path, home: Path | None = None) -> dict[str, tuple[PackageRecord, ...]]:
    """The packages the last import of ``folder`` resolved, per instance (none for another folder)."""
    data = _record(home)
    if Path(str(data.get("folder", ""))) != Path(folder).resolve():
        return {}
    try:
        return {str(iid): tuple(PackageRecord(**r) for r in records) for iid, records in dict(data["packages"]).items()}
    except (KeyError, TypeError, ValueError):
        return {}


def recorded_checkout(home: Path | None = None) -> Path | None:
    """The folder the last import recorded (None: no import, or the folder is gone)."""
    recorded = _record(home).get("folder")
    folder = Path(str(recorded)) if recorded else None
    return folder if folder is not None and folder.is_dir() else None
