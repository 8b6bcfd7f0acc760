"""Run manifests: what a training run was, in one signed JSON file beside its adapter.

A manifest records the dataset (sha256 and split), the config, the base model id and revision, the
adapter's sha256, the project's git commit, the seed, library versions, hardware, timings, final
metrics and the ``claim_under_test``. It is signed with HMAC-SHA256 under the key in
``$HARVEST_MANIFEST_KEY`` when that is set, else carries a plain sha256 digest (detects accidents,
not forgery). ``verify_manifest`` recomputes either and refuses any difference; the sealed audit can
demand an HMAC signature (``require_hmac=True``).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from core import atomic
from train.errors import ManifestError

MANIFEST_KEY_ENV = "HARVEST_MANIFEST_KEY"
MANIFEST_NAME = "manifest.json"
MANIFEST_FORMAT = 1
REQUIRED_FIELDS = (
    "format", "run", "kind", "status", "claim_under_test", "dataset", "config", "base_model", "adapter_sha256",
    "project_git", "seed", "versions", "hardware", "timings", "metrics",
)
_PACKAGES = (
    "torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers", "duckdb", "dbt-core",
    "dbt-duckdb", "pandas", "dbt-harvest",
)


def versions() -> dict[str, str]:
    found = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def hardware() -> dict[str, Any]:
    info: dict[str, Any] = {"platform": platform.platform(), "machine": platform.machine(), "cpus": os.cpu_count()}
    try:
        import torch

        info["cuda_devices"] = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
        info["world_size"] = int(os.environ.get("WORLD_SIZE", "1"))
    except ImportError:  # pragma: no cover - torch is part of the train extra
        info["cuda_devices"] = []
    return info


def project_git(start: Path = Path(__file__).resolve().parent) -> dict[str, Any]:
    """The commit of the dbt-harvest checkout running the training, and whether it had local changes."""
    import pygit2

    found = pygit2.discover_repository(str(Path(start).resolve()))
    if found is None:
        return {"commit": None, "dirty": None}
    repo = pygit2.Repository(found)
    try:
        commit = str(repo.head.target)
    except pygit2.GitError:
        return {"commit": None, "dirty": None}
    dirty = any(
        flags not in (pygit2.GIT_STATUS_CURRENT, pygit2.GIT_STATUS_IGNORED) and not flags & pygit2.GIT_STATUS_WT_NEW
        for flags in repo.status().values()
    )
    return {"commit": commit, "dirty": dirty}


def folder_sha256(folder: Path) -> str:
    """One digest over every file of a folder: sorted 'relative-path sha256' lines, hashed."""
    folder = Path(folder)
    if not folder.is_dir():
        raise ManifestError(f"no folder at {folder} to hash")
    lines = sorted(f"{p.relative_to(folder).as_posix()} {atomic.sha256_file(p)}" for p in folder.rglob("*") if p.is_file())
    if not lines:
        raise ManifestError(f"{folder} is empty; nothing to hash")
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def _canonical(body: dict[str, Any]) -> bytes:
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str).encode("utf-8")


def sign(body: dict[str, Any], key: str | None = None) -> dict[str, Any]:
    """Return ``body`` plus a ``signature``: HMAC-SHA256 under ``key`` (or $HARVEST_MANIFEST_KEY), else sha256."""
    unsigned = {k: v for k, v in body.items() if k != "signature"}
    key = key if key is not None else os.environ.get(MANIFEST_KEY_ENV) or None
    if key:
        value = hmac.new(key.encode("utf-8"), _canonical(unsigned), hashlib.sha256).hexdigest()
        return {**unsigned, "signature": {"kind": "hmac-sha256", "value": value}}
    return {**unsigned, "signature": {"kind": "sha256", "value": hashlib.sha256(_canonical(unsigned)).hexdigest()}}


def verify(signed: dict[str, Any], *, key: str | None = None, require_hmac: bool = False, where: str = "manifest") -> dict[str, Any]:
    """Check the signature of a signed document; return it unchanged or raise ManifestError."""
    signature = signed.get("signature")
    if not isinstance(signature, dict) or signature.get("kind") not in ("hmac-sha256", "sha256"):
        raise ManifestError(f"{where}: no valid signature block")
    body = {k: v for k, v in signed.items() if k != "signature"}
    key = key if key is not None else os.environ.get(MANIFEST_KEY_ENV) or None
    if signature["kind"] == "hmac-sha256":
        if not key:
            raise ManifestError(f"{where}: signed with HMAC; set {MANIFEST_KEY_ENV} to verify it")
        expected = hmac.new(key.encode("utf-8"), _canonical(body), hashlib.sha256).hexdigest()
    else:
        if require_hmac:
            raise ManifestError(f"{where}: only a sha256 digest, but an HMAC signature is required (set {MANIFEST_KEY_ENV} when training)")
        expected = hashlib.sha256(_canonical(body)).hexdigest()
    if not hmac.compare_digest(expected, str(signature.get("value", ""))):
        raise ManifestError(f"{where}: signature does not match its content; the file was altered after signing")
    return signed


def build_manifest(**fields: Any) -> dict[str, Any]:
    """Assemble a manifest from its fields (see REQUIRED_FIELDS); environment facts are filled in here."""
    body = {"format": MANIFEST_FORMAT, "versions": versions(), "hardware": hardware(), "project_git": project_git(), **fields}
    missing = [name for name in REQUIRED_FIELDS if name not in body]
    if missing:
        raise ManifestError(f"manifest is missing field(s): {', '.join(missing)}")
    return body


def write_manifest(run_dir: Path, body: dict[str, Any]) -> Path:
    path = Path(run_dir) / MANIFEST_NAME
    atomic.write_text(path, json.dumps(sign(body), sort_keys=True, indent=1, default=str) + "\n")
    return path


def read_manifest(run_dir: Path, *, require_hmac: bool = False) -> dict[str, Any]:
    """Read and verify ``RUN/manifest.json``; raise ManifestError if missing, malformed or altered."""
    path = Path(run_dir) / MANIFEST_NAME
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ManifestError(f"no manifest at {path}; is {run_dir} a finished run?") from None
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc})") from None
    verify(data, require_hmac=require_hmac, where=str(path))
    missing = [name for name in REQUIRED_FIELDS if name not in data]
    if missing:
        raise ManifestError(f"{path}: missing field(s) {', '.join(missing)}")
    return data
