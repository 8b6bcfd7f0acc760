"""The sealed test split's only reader: unseal for a frozen recipe, audit once, record the result.

The unseal itself is corpora's (``corpora.sealed.unseal``: the run folder must be frozen by `harvest train
freeze` and ``corpora.recipe.verify_frozen`` must find its signed manifest, adapter and config unchanged;
the unseal is appended, hash-chained, to ``pins/_unseals.jsonl``; a second unseal of the same recipe is
refused). This module adds what the audit knows: the RESULT. When a test
audit finishes, one line goes to ``pins/_test_audits.jsonl`` (committed, hash-chained): the recipe, the
manifest's sha256, the unseal's commitment, the date, the task-set hash and k/N official and strict.
A run folder interrupted before that line is written may be resumed with the token it recorded; once the
line exists, the recipe's test audit is over for good.

A recipe has two arms (``corpora.sealed.ARMS``): ``recipe``, its own model with its adapter, and ``base``,
the untrained base model it was trained from, with no adapter. The base arm is the control of the same
frozen protocol: unsealed under the recipe's identity, audited once, its result recorded beside the
recipe's (``arm`` in both ledgers), so "base vs trained on the sealed split" is two once-only audits.
"""

from __future__ import annotations

from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.corpora.chain import append_entry, read_chain
from dbt_harvest.corpora.recipe import FrozenRecipe
from dbt_harvest.corpora.sealed import ARMS, arm_of
from dbt_harvest.eval.env.errors import EnvError

RESULTS_NAME = "_test_audits.jsonl"
RESULT_FIELDS = ("recipe", "time", "official", "n", "prev")


class SealedAuditError(EnvError):
    """A test-split audit was refused (no recipe, already audited, a broken results ledger)."""


def results(pins: Path) -> list[dict[str, Any]]:
    """The recorded test audits, hash chain checked."""
    return read_chain(pins / RESULTS_NAME, RESULT_FIELDS, SealedAuditError, "results ledger")


def refuse_if_audited(pins: Path, recipe: str, arm: str = "recipe") -> None:
    for entry in results(pins):
        if entry["recipe"] == recipe and arm_of(entry) == arm:
            whose = "" if arm == "recipe" else f"'s {arm} arm"
            raise SealedAuditError(
                f"recipe {recipe!r}{whose} already had its test audit ({entry['time']}: official {entry['official']}/"
                f"{entry['n']}); the test split is audited once per frozen recipe and arm"
            )


def audited(pins: Path, recipe: str, arm: str = "recipe") -> dict[str, Any] | None:
    """The recorded test audit of one arm of a recipe, or None."""
    return next((e for e in results(pins) if e["recipe"] == recipe and arm_of(e) == arm), None)


def check_recipe(recipe: Path, pins: Path, arm: str = "recipe") -> FrozenRecipe:
    """The frozen recipe ``recipe`` names (run folder or its manifest), verified, and this arm not audited
    before.

    Reads nothing sealed: the audit calls it before it prepares the driver and before the unseal.
    """
    from dbt_harvest.corpora.sealed import check_recipe as verified

    if arm not in ARMS:
        raise SealedAuditError(f"unknown arm {arm!r}; one of {', '.join(ARMS)}")
    frozen = verified(recipe)
    refuse_if_audited(pins, frozen.recipe, arm)
    return frozen


def recipe_driver_options(frozen: FrozenRecipe, model: str, adapter: str | None, arm: str = "recipe") -> dict[str, Any]:
    """hf driver options that play the frozen recipe itself: its base model, its revision and its adapter
    (the ``base`` arm: the same base model and revision, no adapter).

    ``--model`` may name another copy of the base model (a local folder of the same weights); ``--adapter``,
    when given, must be the recipe's adapter byte for byte, since the audit's result is the recipe's.
    """
    from dbt_harvest.corpora.recipe import ADAPTER_DIR, folder_sha256

    recipe_adapter = frozen.run_dir / ADAPTER_DIR
    if arm == "base" and adapter:
        raise SealedAuditError("the base arm plays the recipe's base model without an adapter; leave --adapter out")
    if (
        adapter
        and Path(adapter).resolve() != recipe_adapter.resolve()
        and (not Path(adapter).is_dir() or folder_sha256(Path(adapter)) != frozen.adapter_sha256)
    ):
        raise SealedAuditError(
            f"--adapter {adapter} is not the adapter of the frozen recipe {frozen.recipe}; leave --adapter out "
            "(the recipe's own adapter plays)"
        )
    base = frozen.base_model
    revision = str(base.get("revision") or "")
    options: dict[str, Any] = {
        "adapter": str(recipe_adapter) if arm == "recipe" else None,
        "revision": revision if revision not in ("", "local") else None,
    }
    if model:
        return {**options, "model": model}
    local = local_base(frozen.run_dir, base)
    if local is not None:
        return {**options, "model": local}
    if revision == "local" or str(base.get("id", "")).startswith("tiny://"):
        raise SealedAuditError(
            f"the base model of recipe {frozen.recipe} ({base.get('id')}) was a local folder that is not here; "
            "pass --model with a copy of it"
        )
    return {**options, "model": str(base.get("id"))}


def local_base(run_dir: Path, base: dict[str, Any]) -> str | None:
    """The folder a run's manifest says its base model was loaded from (relative to the run folder, as
    tiny:// records it, or absolute), when that folder is here; None: load the base by its id."""
    path = str(base.get("path") or "")
    if path and not Path(path).is_absolute() and (run_dir / path).is_dir():
        return str(run_dir / path)
    if path and Path(path).is_dir():
        return path
    return None


def unseal_tasks(recipe: Path, home: Path, pins: Path, arm: str = "recipe") -> tuple[dict[str, Any], list[TaskRecord]]:
    """Unseal the test split for one arm of a frozen recipe; -> (token fields for run.json, the test tasks)."""
    from dbt_harvest.corpora.sealed import unseal
    from dbt_harvest.corpora.store import load_tasks

    check_recipe(recipe, pins, arm)
    token = unseal(recipe, home=home, pins=pins, arm=arm)
    tasks = load_tasks("test", home, pins, purpose="eval", token=token)
    return asdict(token), tasks


def resume_tasks(sealed: dict[str, Any], home: Path, pins: Path) -> list[TaskRecord]:
    """The test tasks again, for an interrupted run folder, with the token it recorded (checked by corpora)."""
    from dbt_harvest.corpora.sealed import UnsealToken
    from dbt_harvest.corpora.store import load_tasks

    arm = str(sealed.get("arm") or "recipe")
    refuse_if_audited(pins, str(sealed.get("recipe")), arm)
    try:
        token = UnsealToken(
            **{k: str(sealed[k]) for k in ("recipe", "manifest_sha256", "seal_root", "issued_at", "commitment")},
            arm=arm,
        )
    except KeyError as exc:
        raise SealedAuditError(f"the run folder's seal token lacks {exc}; it cannot be resumed") from None
    return load_tasks("test", home, pins, purpose="eval", token=token)


def record_result(pins: Path, sealed: dict[str, Any], report: dict[str, Any], now: str | None = None) -> dict[str, Any]:
    """Append the finished test audit to the committed results ledger; refuse a second one for the recipe."""
    from dbt_harvest.corpora.locks import locked

    arm = str(sealed.get("arm") or "recipe")
    with locked(pins):
        lines = results(pins)
        refuse_if_audited(pins, str(sealed["recipe"]), arm)
        body = {
            **({"arm": arm} if arm != "recipe" else {}),
            "recipe": sealed["recipe"],
            "manifest_sha256": sealed["manifest_sha256"],
            "unseal_commitment": sealed["commitment"],
            "task_set_sha256": report["task_set_sha256"],
            "time": now or datetime.now(UTC).replace(microsecond=0).isoformat(),
            "driver": report["driver"].get("name"),
            "n": report["n"],
            "official": report["official"],
            "strict": report["strict"],
            "missing": len(report["missing"]),
            "crashed": len(report["crashed"]),
            "prev": lines[-1]["commitment"] if lines else "",
        }
        return append_entry(pins / RESULTS_NAME, body)
