"""`harvest train freeze RUN`: seal a finished run as the recipe the sealed audit may evaluate.

The test split is opened once, for a frozen recipe, so "frozen" must be checkable: freezing verifies
the run's manifest signature and recomputes the adapter's sha256, then writes ``RUN/FROZEN.json``
(signed the same way as manifests) naming the manifest's file hash, the adapter hash and the config
hash. ``verify_frozen`` — what the audit calls — refuses a run that is not frozen, or whose manifest,
adapter or config changed after freezing. Freezing is once: a frozen run is never re-frozen.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from core import atomic
from train.errors import FreezeError, ManifestError
from train.manifest import MANIFEST_NAME, folder_sha256, read_manifest, sign, verify
from train.runner import ADAPTER_DIR

FROZEN_NAME = "FROZEN.json"


@dataclass(frozen=True)
class FrozenRecipe:
    run_dir: Path
    run: str
    kind: str
    manifest_sha256: str
    adapter_sha256: str
    config_sha256: str
    base_model: dict
    claim_under_test: str
    frozen_at: str


def _config_sha256(manifest: dict) -> str:
    return hashlib.sha256(json.dumps(manifest["config"], sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def freeze_run(run_dir: Path, *, require_hmac: bool = False) -> FrozenRecipe:
    """Verify a finished run and mark it frozen; raise FreezeError naming what is wrong."""
    run_dir = Path(run_dir)
    if (run_dir / FROZEN_NAME).exists():
        raise FreezeError(f"{run_dir} is already frozen; a frozen recipe is never re-frozen (train a new run instead)")
    try:
        manifest = read_manifest(run_dir, require_hmac=require_hmac)
    except ManifestError as exc:
        raise FreezeError(f"cannot freeze {run_dir}: {exc}") from None
    if manifest.get("status") != "completed":
        raise FreezeError(f"cannot freeze {run_dir}: its manifest says status {manifest.get('status')!r}, not 'completed'")
    adapter = folder_sha256(run_dir / ADAPTER_DIR) if (run_dir / ADAPTER_DIR).is_dir() else None
    if adapter != manifest["adapter_sha256"]:
        raise FreezeError(f"cannot freeze {run_dir}: the adapter on disk does not match the manifest's adapter_sha256")
    body = {
        "run": manifest["run"],
        "kind": manifest["kind"],
        "manifest_sha256": atomic.sha256_file(run_dir / MANIFEST_NAME),
        "adapter_sha256": adapter,
        "config_sha256": _config_sha256(manifest),
        "base_model": manifest["base_model"],
        "claim_under_test": manifest["claim_under_test"],
        "frozen_at": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    atomic.write_text(run_dir / FROZEN_NAME, json.dumps(sign(body), sort_keys=True, indent=1) + "\n")
    return FrozenRecipe(run_dir=run_dir, **body)


def verify_frozen(run_dir: Path, *, require_hmac: bool = False) -> FrozenRecipe:
    """The audit's check: the run is frozen and nothing it froze has changed since."""
    run_dir = Path(run_dir)
    path = run_dir / FROZEN_NAME
    try:
        frozen = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FreezeError(f"{run_dir} is not frozen; run `harvest train freeze {run_dir}` first") from None
    except json.JSONDecodeError as exc:
        raise FreezeError(f"{path}: not valid JSON ({exc})") from None
    try:
        verify(frozen, require_hmac=require_hmac, where=str(path))
        manifest = read_manifest(run_dir, require_hmac=require_hmac)
        adapter = folder_sha256(run_dir / ADAPTER_DIR)
    except ManifestError as exc:
        raise FreezeError(f"frozen recipe {run_dir} fails verification: {exc}") from None
    if atomic.sha256_file(run_dir / MANIFEST_NAME) != frozen["manifest_sha256"]:
        raise FreezeError(f"frozen recipe {run_dir}: the manifest changed after freezing")
    if adapter != frozen["adapter_sha256"] or adapter != manifest["adapter_sha256"]:
        raise FreezeError(f"frozen recipe {run_dir}: the adapter changed after freezing")
    if _config_sha256(manifest) != frozen["config_sha256"]:
        raise FreezeError(f"frozen recipe {run_dir}: the config changed after freezing")
    body = {k: v for k, v in frozen.items() if k != "signature"}
    return FrozenRecipe(run_dir=run_dir, **body)
