"""Spider 2.0-DBT's sealed part: audited once per frozen recipe and arm, recorded in a committed ledger.

The benchmark's data is public, so nothing here hides it; what is enforced is the protocol, the one our own
test split has. A sealed audit needs a frozen recipe (``harvest train freeze``) that still verifies
(``corpora.recipe.verify_frozen``); starting one appends a ``start`` entry to ``pins/_spider2_audits.jsonl``
(hash-chained, ``corpora.chain``), and a second start for the same recipe and arm is refused, so a result
cannot be retried until it looks good. The run folder records the start's commitment: an interrupted
audit is resumed from its run folder (the ledger must hold that start and no result yet); when it ends, a
``result`` entry records k/N. Dev audits write nothing here: they are reports, never a selection signal.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dbt_harvest.corpora.chain import append_entry, read_chain
from dbt_harvest.corpora.recipe import FrozenRecipe
from dbt_harvest.eval.env.errors import EnvError

LEDGER_NAME = "_spider2_audits.jsonl"
FIELDS = ("event", "recipe", "arm", "time", "prev")
START, RESULT = "start", "result"


class Spider2SealedError(EnvError):
    """A sealed Spider2 audit was refused (no frozen recipe, already audited, a broken ledger)."""


def entries(pins: Path) -> list[dict[str, Any]]:
    """Every entry of the ledger, its hash chain checked."""
    return read_chain(pins / LEDGER_NAME, FIELDS, Spider2SealedError, "Spider2 sealed-audit ledger")


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat()


def check_recipe(recipe: Path, pins: Path, arm: str, *, resuming: dict[str, Any] | None = None) -> FrozenRecipe:
    """The verified frozen recipe, refused when this arm already started a sealed Spider2 audit (other than
    ``resuming``, the start a run folder recorded, which must be this recipe's)."""
    from dbt_harvest.corpora.errors import FreezeError, ManifestError
    from dbt_harvest.corpora.recipe import verify_frozen
    from dbt_harvest.corpora.sealed import ARMS

    if arm not in ARMS:
        raise Spider2SealedError(f"unknown arm {arm!r}; one of {', '.join(ARMS)}")
    try:
        frozen = verify_frozen(recipe)
    except (FreezeError, ManifestError) as exc:
        raise Spider2SealedError(f"the sealed Spider2 split needs a frozen recipe: {exc}") from None
    if resuming is not None and resuming.get("recipe") != frozen.recipe:
        raise Spider2SealedError(
            f"the run folder holds recipe {resuming.get('recipe')!r}'s sealed audit, not "
            f"{frozen.recipe!r}'s; pass that recipe or another run folder"
        )
    for entry in entries(pins):
        if resuming is not None and entry.get("commitment") == resuming.get("commitment"):
            continue
        if entry["recipe"] == frozen.recipe and entry["arm"] == arm and entry["event"] == START:
            raise Spider2SealedError(
                f"recipe {frozen.recipe!r} ({arm} arm) already started its sealed Spider2 audit ({entry['time']}); "
                "the sealed part is audited once per frozen recipe and arm (resume it with its own --run-dir)"
            )
    return frozen


def start(pins: Path, frozen: FrozenRecipe, arm: str, task_set_sha256: str, now: str | None = None) -> dict[str, Any]:
    """Record the start of one arm's sealed audit; -> the entry (the run folder keeps it)."""
    from dbt_harvest.corpora.locks import locked

    with locked(pins):
        check_recipe(frozen.run_dir, pins, arm)
        lines = entries(pins)
        body = {
            "event": START,
            "recipe": frozen.recipe,
            "arm": arm,
            "manifest_sha256": frozen.manifest_sha256,
            "task_set_sha256": task_set_sha256,
            "time": now or _now(),
            "prev": lines[-1]["commitment"] if lines else "",
        }
        return append_entry(pins / LEDGER_NAME, body)


def resumable(pins: Path, sealed: dict[str, Any]) -> None:
    """Refuse to resume a run folder whose start is not in the ledger, or whose result is already recorded."""
    lines = entries(pins)
    if not any(e["event"] == START and e.get("commitment") == sealed.get("commitment") for e in lines):
        raise Spider2SealedError("the run folder's sealed start is not in the ledger; it cannot be resumed")
    for entry in lines:
        if entry["event"] == RESULT and entry.get("start") == sealed.get("commitment"):
            raise Spider2SealedError(
                f"this sealed Spider2 audit already ended ({entry['time']}: official "
                f"{entry['official']}/{entry['n']}); it is not run again"
            )


def record_result(pins: Path, sealed: dict[str, Any], report: dict[str, Any], now: str | None = None) -> dict[str, Any]:
    """Append the finished sealed audit's k/N to the ledger (once)."""
    from dbt_harvest.corpora.locks import locked

    with locked(pins):
        resumable(pins, sealed)
        lines = entries(pins)
        body = {
            "event": RESULT,
            "recipe": sealed["recipe"],
            "arm": sealed["arm"],
            "start": sealed["commitment"],
            "task_set_sha256": report["task_set_sha256"],
            "time": now or _now(),
            "driver": report["driver"].get("name"),
            "n": report["n"],
            "official": report["official"],
            "strict": report["strict"],
            "missing": len(report["missing"]),
            "crashed": len(report["crashed"]),
            "prev": lines[-1]["commitment"] if lines else "",
        }
        return append_entry(pins / LEDGER_NAME, body)
