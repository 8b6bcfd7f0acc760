"""Frozen recipes: the one contract between `harvest train freeze RUN` and the sealed test audit.

A training run folder holds ``manifest.json`` (signed: HMAC-SHA256 under ``$HARVEST_MANIFEST_KEY`` when
that is set, else a plain sha256 digest), the LoRA adapter in ``adapter/`` and a copy of its config in
``config.toml``. Freezing adds ``FROZEN.json``, signed the same way, naming what was frozen::

    {"recipe": "<run>@<recipe_sha256[:12]>", "run": ..., "kind": ..., "manifest_sha256": ...,
     "adapter_sha256": ..., "config_sha256": ..., "recipe_sha256": ..., "base_model": {...},
     "claim_under_test": ..., "frozen_at": ..., "signature": {...}}

Both sides go through :func:`inspect_run`, which verifies the manifest's signature and fields, that the
run completed, that the adapter on disk hashes to the manifest's ``adapter_sha256`` and that
``config.toml`` holds the manifest's config. :func:`freeze` writes what it found; :func:`verify_frozen`
(called by ``corpora.sealed.unseal``) recomputes it and refuses any difference from ``FROZEN.json``.

The recipe's identity (what the unseal ledger refuses to unseal twice) is the run's name plus a hash
over what a user would reproduce: the config (without ``[run] output_dir``, which only says where the
folder went), the base model and the training data's sha256. Retraining the same recipe elsewhere is
the same recipe; changing any of the three is a new one.

The signing primitives live here too (train/manifest.py signs with them) so that the writer and the
reader of a signature can never disagree; they sit in corpora because the sealed split, which corpora
owns, is what they protect.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.corpora.errors import FreezeError, ManifestError

MANIFEST_KEY_ENV = "HARVEST_MANIFEST_KEY"
MANIFEST_NAME = "manifest.json"
FROZEN_NAME = "FROZEN.json"
ADAPTER_DIR = "adapter"
CONFIG_NAME = "config.toml"
#: Fields every run manifest carries (train/manifest.py writes them, this module checks them).
REQUIRED_FIELDS = (
    "format",
    "run",
    "kind",
    "status",
    "claim_under_test",
    "dataset",
    "config",
    "base_model",
    "adapter_sha256",
    "project_git",
    "seed",
    "versions",
    "hardware",
    "timings",
    "metrics",
)
FROZEN_FIELDS = (
    "recipe",
    "run",
    "kind",
    "manifest_sha256",
    "adapter_sha256",
    "config_sha256",
    "recipe_sha256",
    "base_model",
    "claim_under_test",
    "frozen_at",
)


# --- signatures ----------------------------------------------------------------------------------------


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")


def _key(key: str | None) -> str | None:
    return key if key is not None else os.environ.get(MANIFEST_KEY_ENV) or None


def sign(body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    """Return ``body`` plus a ``signature``: HMAC-SHA256 under ``key`` (or $HARVEST_MANIFEST_KEY), else sha256."""
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    key = _key(key)
    if key:
        value = hmac.new(key.encode("utf-8"), _canonical(unsigned), hashlib.sha256).hexdigest()
        return {**unsigned, "signature": {"kind": "hmac-sha256", "value": value}}
    return {**unsigned, "signature": {"kind": "sha256", "value": hashlib.sha256(_canonical(unsigned)).hexdigest()}}


def verify(
    signed: dict[str, Any], *, key: str | None = None, require_hmac: bool = False, where: str = "manifest"
) -> dict[str, Any]:
    """Check the signature of a signed document; return it unchanged or raise ManifestError."""
    signature = signed.get("signature")
    if not isinstance(signature, dict) or signature.get("kind") not in ("hmac-sha256", "sha256"):
        raise ManifestError(f"{where}: no valid signature block")
    body = {k: v for k, v in signed.items() if k != "signature"}
    key = _key(key)
    if signature["kind"] == "hmac-sha256":
        if not key:
            raise ManifestError(f"{where}: signed with HMAC; set {MANIFEST_KEY_ENV} to verify it")
        expected = hmac.new(key.encode("utf-8"), _canonical(body), hashlib.sha256).hexdigest()
    else:
        if require_hmac:
            raise ManifestError(
                f"{where}: only a sha256 digest, but an HMAC signature is required (set {MANIFEST_KEY_ENV} when training)"
            )
        expected = hashlib.sha256(_canonical(body)).hexdigest()
    if not hmac.compare_digest(expected, str(signature.get("value", ""))):
        raise ManifestError(f"{where}: signature does not match its content; the file was altered after signing")
    return signed


def folder_sha256(folder: Path) -> str:
    """One digest over every file of a folder: sorted 'relative-path sha256' lines, hashed."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ManifestError(f"no folder at {folder} to hash")
    lines = sorted(
        f"{p.relative_to(folder).as_posix()} {atomic.sha256_file(p)}" for p in folder.rglob("*") if p.is_file()
    )
    if not lines:
        raise ManifestError(f"{folder} is empty; nothing to hash")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _read_json(path: Path, missing: str) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(missing) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ManifestError(f"{path}: not a JSON object")
    return data


def read_manifest(run_dir: Path, *, require_hmac: bool = False) -> dict[str, Any]:
    """Read and verify ``RUN/manifest.json``; raise ManifestError if missing, malformed or altered."""
    path = Path(run_dir) / MANIFEST_NAME
    data = _read_json(path, f"no manifest at {path}; is {run_dir} a finished run?")
    verify(data, require_hmac=require_hmac, where=str(path))
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    if missing:
        raise ManifestError(f"{path}: missing field(s) {', '.join(missing)}")
    return data


# --- the run a recipe is ---------------------------------------------------------------------------------


def _sha256_json(value: Any) -> str:
    return hashlib.sha256(json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()).hexdigest()


def config_sha256(config: dict[str, Any]) -> str:
    """The hash of a run's config as the manifest records it (key order does not matter)."""
    return _sha256_json(config)


def recipe_sha256(manifest: dict[str, Any]) -> str:
    """What a recipe is: the config without [run] output_dir, the base model, the training data's sha256."""
    config = json.loads(json.dumps(manifest["config"], default=str))
    if isinstance(config.get("run"), dict):
        config["run"].pop("output_dir", None)
    dataset = manifest["dataset"].get("sha256") if isinstance(manifest["dataset"], dict) else manifest["dataset"]
    return _sha256_json({"config": config, "base_model": manifest["base_model"], "dataset": dataset})


def resolve_run_dir(path: Path) -> Path:
    """The run folder a ``--recipe`` names: the folder itself, or its manifest.json or FROZEN.json."""
    path = Path(path)
    if path.is_dir():
        return path
    if path.name in (MANIFEST_NAME, FROZEN_NAME) and path.parent.is_dir():
        return path.parent
    if not path.exists():
        raise FreezeError(f"no run folder at {path}; pass the run folder of a finished training run (runs/<name>)")
    raise FreezeError(
        f"{path} is not a run folder, nor its {MANIFEST_NAME} or {FROZEN_NAME}; pass the run folder (runs/<name>)"
    )


@dataclass(frozen=True)
class RunFacts:
    """What a finished run folder holds, every piece verified (see :func:`inspect_run`)."""

    run_dir: Path
    manifest: dict[str, Any]
    manifest_sha256: str
    adapter_sha256: str
    config_sha256: str
    recipe_sha256: str

    @property
    def recipe(self) -> str:
        """The recipe's identity in the unseal and test-audit ledgers: ``<run>@<recipe_sha256[:12]>``."""
        return f"{self.manifest['run']}@{self.recipe_sha256[:12]}"


def inspect_run(run_dir: Path, *, require_hmac: bool = False) -> RunFacts:
    """THE check both freeze and unseal make: signed manifest, completed, adapter and config as recorded."""
    run_dir = Path(run_dir)
    try:
        manifest = read_manifest(run_dir, require_hmac=require_hmac)
    except ManifestError as exc:
        raise FreezeError(f"run {run_dir} fails verification: {exc}") from None
    if manifest.get("status") != "completed":
        raise FreezeError(f"run {run_dir}: its manifest says status {manifest.get('status')!r}, not 'completed'")
    adapter_dir = run_dir / ADAPTER_DIR
    if not adapter_dir.is_dir():
        raise FreezeError(f"run {run_dir} has no {ADAPTER_DIR}/ folder; the adapter the manifest names is gone")
    adapter = folder_sha256(adapter_dir)
    if adapter != manifest["adapter_sha256"]:
        raise FreezeError(
            f"run {run_dir}: the adapter changed (on disk {adapter[:12]}, manifest says {str(manifest['adapter_sha256'])[:12]})"
        )
    config_path = run_dir / CONFIG_NAME
    try:
        stored = tomllib.loads(config_path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FreezeError(f"run {run_dir} has no {CONFIG_NAME}; the config the manifest records is gone") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise FreezeError(f"run {run_dir}: {CONFIG_NAME} is unreadable ({exc})") from None
    config = config_sha256(manifest["config"])
    if config_sha256(stored) != config:
        raise FreezeError(f"run {run_dir}: the config changed ({CONFIG_NAME} no longer holds the manifest's config)")
    return RunFacts(
        run_dir=run_dir,
        manifest=manifest,
        manifest_sha256=atomic.sha256_file(run_dir / MANIFEST_NAME),
        adapter_sha256=adapter,
        config_sha256=config,
        recipe_sha256=recipe_sha256(manifest),
    )


@dataclass(frozen=True)
class FrozenRecipe:
    """A verified frozen recipe: what FROZEN.json says, checked against the run folder as it is now."""

    run_dir: Path
    recipe: str
    run: str
    kind: str
    manifest_sha256: str
    adapter_sha256: str
    config_sha256: str
    recipe_sha256: str
    base_model: dict[str, Any]
    claim_under_test: str
    frozen_at: str

    def to_dict(self) -> dict[str, Any]:
        return {"run_dir": str(self.run_dir), **{name: getattr(self, name) for name in FROZEN_FIELDS}}


def _body(facts: RunFacts, frozen_at: str) -> dict[str, Any]:
    m = facts.manifest
    return {
        "recipe": facts.recipe,
        "run": m["run"],
        "kind": m["kind"],
        "manifest_sha256": facts.manifest_sha256,
        "adapter_sha256": facts.adapter_sha256,
        "config_sha256": facts.config_sha256,
        "recipe_sha256": facts.recipe_sha256,
        "base_model": m["base_model"],
        "claim_under_test": m["claim_under_test"],
        "frozen_at": frozen_at,
    }


def freeze(run_dir: Path, *, require_hmac: bool = False, now: str | None = None) -> FrozenRecipe:
    """Verify a finished run and write its signed FROZEN.json; a frozen run is never re-frozen."""
    run_dir = Path(run_dir)
    if (run_dir / FROZEN_NAME).exists():
        raise FreezeError(f"{run_dir} is already frozen; a frozen recipe is never re-frozen (train a new run instead)")
    facts = inspect_run(run_dir, require_hmac=require_hmac)
    body = _body(facts, now or datetime.now(UTC).isoformat(timespec="seconds"))
    atomic.write_text(run_dir / FROZEN_NAME, json.dumps(sign(body), sort_keys=True, indent=1) + "\n")
    return FrozenRecipe(run_dir=run_dir, **body)


def verify_frozen(path: Path, *, require_hmac: bool = False) -> FrozenRecipe:
    """The sealed audit's check: ``path`` (run folder or its manifest) is frozen and nothing frozen changed."""
    run_dir = resolve_run_dir(path)
    frozen_path = run_dir / FROZEN_NAME
    if not frozen_path.exists():
        raise FreezeError(f"{run_dir} is not frozen; run `harvest train freeze {run_dir}` first")
    try:
        frozen = verify(
            _read_json(frozen_path, f"{frozen_path} vanished"), require_hmac=require_hmac, where=str(frozen_path)
        )
    except ManifestError as exc:
        raise FreezeError(f"frozen recipe {run_dir} fails verification: {exc}") from None
    missing = [name for name in FROZEN_FIELDS if name not in frozen]
    if missing:
        raise FreezeError(
            f"{frozen_path}: missing field(s) {', '.join(missing)}; freeze the run again from a fresh copy"
        )
    facts = inspect_run(run_dir, require_hmac=require_hmac)
    now = _body(facts, frozen["frozen_at"])
    for name in ("manifest_sha256", "adapter_sha256", "config_sha256", "recipe_sha256", "recipe"):
        if now[name] != frozen[name]:
            what = name.removesuffix("_sha256")
            raise FreezeError(
                f"frozen recipe {run_dir}: the {what} changed after freezing ({str(now[name])[:12]}, frozen {str(frozen[name])[:12]})"
            )
    return FrozenRecipe(run_dir=run_dir, **{name: frozen[name] for name in FROZEN_FIELDS})
