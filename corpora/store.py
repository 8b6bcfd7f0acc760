"""Where task records live, by split: train/dev in HARVEST_HOME/tasks/<split>/, test only in the sealed store.

:func:`store_task` is what `harvest mint` calls for each kept task; it refuses a record whose split or
split group disagrees with the reservation ledger. :func:`load_tasks` is the one reader: it checks that
every record sits in its own split's folder and agrees with the ledger, refuses non-train splits for the
purpose "train", and reads the test split only with the audit's UnsealToken.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from dbt_harvest.core.pin import pin_path, read_pin
from dbt_harvest.core.task_record import SPLITS, TaskRecord, read_task, write_task
from dbt_harvest.corpora import sealed
from dbt_harvest.corpora.errors import FirewallError
from dbt_harvest.corpora.firewall import require_train
from dbt_harvest.corpora.ledger import SplitLedger

if TYPE_CHECKING:
    from dbt_harvest.harvester.mint.pipeline import MintTarget

PURPOSES = ("train", "dataset", "eval", "inspect")


def mint_target(home: Path, pins: Path, *, rebuild_sealed: bool = False) -> MintTarget:
    """The corpus as the mint sees it: each pin's reserved split from the ledger, kept tasks into the store.
    ``rebuild_sealed``: an empty sealed store may be re-minted against the committed seal (see
    :func:`corpora.sealed.seal_task`)."""
    from dbt_harvest.corpora.ledger import assignment_of
    from dbt_harvest.harvester.mint.pipeline import MintTarget

    def split_of(pin_id: str) -> tuple[str, str] | None:
        found = assignment_of(pin_id, pins)
        return (found.split, found.group) if found else None

    return MintTarget(
        split_of=split_of,
        store=lambda record: store_task(record, home, pins, rebuild_sealed=rebuild_sealed),
        stored=lambda split, pin_id: stored_tasks(home, split, pin_id),
        withdraw=lambda split, pin_id, instance_id: withdraw_task(home, split, pin_id, instance_id),
    )


def withdraw_task(home: Path, split: str, pin_id: str, instance_id: str) -> bool:
    """Remove the stored task ``instance_id`` of ``pin_id`` from the ``split`` store (a later decision no longer
    keeps it); whether there was one. The sealed store is never changed this way: a sealed task that a
    decision withdraws is refused, since the seal would no longer say what the store holds (re-seal instead)."""
    if split not in SPLITS:
        raise FirewallError(f"{instance_id}: unknown split {split!r}")
    if split == "test":
        if any(r.instance_id == instance_id for r in stored_tasks(home, split, pin_id)):
            raise FirewallError(
                f"{instance_id}: a sealed test task cannot be withdrawn by a mint; mint the test split again "
                "against a new seal (docs/corpus/REBUILD.md)"
            )
        return False
    path = split_dir(home, split) / f"{instance_id}.json"
    if not path.is_file() or read_task(path).pin != pin_id:
        return False
    path.unlink()
    return True


def stored_tasks(home: Path, split: str, pin_id: str) -> list[TaskRecord]:
    """The kept tasks of one pin in the store of its split (the sealed store for test), by id."""
    folder = sealed.sealed_dir(home) if split == "test" else split_dir(home, split)
    slug = pin_id.split("@", 1)[0]
    found = (read_task(p) for p in sorted(folder.glob(f"{slug}.*.json"))) if folder.is_dir() else ()
    return [record for record in found if record.pin == pin_id]


def split_dir(home: Path, split: str) -> Path:
    return home / "tasks" / split


def _check_against_ledger(record: TaskRecord, ledger: SplitLedger, pins: Path) -> None:
    found = ledger.assignment(read_pin(pin_path(record.pin, pins)))
    if found is None:
        raise FirewallError(
            f"{record.instance_id}: pin {record.pin} has no reserved split; run `harvest split assign` before minting"
        )
    if found.split != record.split:
        raise FirewallError(
            f"{record.instance_id}: record says split {record.split!r} but the ledger reserves {record.pin} for {found.split!r}"
        )
    if record.split_group != found.group:
        raise FirewallError(
            f"{record.instance_id}: record says split group {record.split_group!r}, the ledger says {found.group!r}"
        )


def store_task(record: TaskRecord, home: Path, pins: Path, *, rebuild_sealed: bool = False) -> Path:
    """Write one minted task where its (ledger-confirmed) split says; test goes only to the sealed store."""
    if record.split not in SPLITS:
        raise FirewallError(f"{record.instance_id}: unknown split {record.split!r}")
    _check_against_ledger(record, SplitLedger.load(pins), pins)
    if record.split == "test":
        return sealed.seal_task(record, home, pins, rebuild=rebuild_sealed)
    return write_task(record, split_dir(home, record.split))


def load_tasks(
    split: str,
    home: Path,
    pins: Path,
    *,
    purpose: str,
    token: sealed.UnsealToken | None = None,
) -> list[TaskRecord]:
    """Every task of ``split`` (sorted by id), checked; see the module docstring for the rules."""
    if purpose not in PURPOSES:
        raise FirewallError(f"unknown purpose {purpose!r}; one of {', '.join(PURPOSES)}")
    if split not in SPLITS:
        raise FirewallError(f"unknown split {split!r}; one of {', '.join(SPLITS)}")
    if purpose == "train" and split != "train":
        raise FirewallError(f"purpose 'train' may read only the train split, not {split!r}")
    if split == "test":
        if token is None:
            raise FirewallError(
                "the test split is sealed; only the audit's unseal path (corpora.sealed.unseal) reads it"
            )
        records = sealed.read_sealed(home, pins, token)
    else:
        folder = split_dir(home, split)
        records = [read_task(p) for p in sorted(folder.glob("*.json"))] if folder.is_dir() else []
    ledger = SplitLedger.load(pins)
    for record in records:
        if record.split != split:
            raise FirewallError(
                f"{record.instance_id} sits in the {split} folder but says split {record.split!r}; a task file was moved"
            )
        _check_against_ledger(record, ledger, pins)
    records.sort(key=lambda r: r.instance_id)
    if purpose == "train":
        return require_train(records)
    return records
