"""Run manifests: what a training run was, in one signed JSON file beside its adapter.

A manifest records the dataset (sha256 and split), the config, the base model id and revision, the
adapter's sha256, the project's git commit, the seed, library versions, hardware, timings, final
metrics and the ``claim_under_test``. It is signed with HMAC-SHA256 under the key in
``$HARVEST_MANIFEST_KEY`` when that is set, else carries a plain sha256 digest (detects accidents,
not forgery). Signing, reading and verifying are the frozen-recipe contract's (``corpora.recipe``:
``sign``, ``read_manifest``, ``verify``), so the writer here and the sealed audit's reader never differ.
"""

from __future__ import annotations

import json
import os
import platform
from importlib import metadata
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.corpora.recipe import MANIFEST_NAME, REQUIRED_FIELDS, sign
from dbt_harvest.train.errors import ManifestError

MANIFEST_FORMAT = 1
_PACKAGES = (
    "torch",
    "transformers",
    "trl",
    "peft",
    "accelerate",
    "datasets",
    "tokenizers",
    "duckdb",
    "dbt-core",
    "dbt-duckdb",
    "pandas",
    "dbt-harvest",
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


def project_git(checkout: Path | None = None) -> dict[str, Any]:
    """The commit of the dbt-harvest checkout running the training, and whether it had local changes.

    Only a git repository whose work tree IS ``checkout`` counts: code installed from a wheel lives in
    site-packages, and a virtualenv inside somebody else's repository must not record that repository's
    commit as ours. Then both fields are None and the manifest's ``versions`` name the installed release.
    ``checkout`` defaults to the one the running code comes from (``core.source``).
    """
    import pygit2

    from dbt_harvest.core.source import source_checkout

    checkout = checkout or source_checkout()
    if checkout is None:  # an installed package: its version is in ``versions``
        return {"commit": None, "dirty": None}

    found = pygit2.discover_repository(str(checkout))
    if found is None:
        return {"commit": None, "dirty": None}
    repo = pygit2.Repository(found)
    if repo.workdir is None or Path(repo.workdir).resolve() != checkout.resolve():
        return {"commit": None, "dirty": None}
    try:
        commit = str(repo.head.target)
    except pygit2.GitError:
        return {"commit": None, "dirty": None}
    dirty = any(
        flags not in (pygit2.GIT_STATUS_CURRENT, pygit2.GIT_STATUS_IGNORED) and not flags & pygit2.GIT_STATUS_WT_NEW
        for flags in repo.status().values()
    )
    return {"commit": commit, "dirty": dirty}


def build_manifest(**fields: Any) -> dict[str, Any]:
    """Assemble a manifest from its fields (see REQUIRED_FIELDS); environment facts are filled in here."""
    body = {
        "format": MANIFEST_FORMAT,
        "versions": versions(),
        "hardware": hardware(),
        "project_git": project_git(),
        **fields,
    }
    missing = [name for name in REQUIRED_FIELDS if name not in body]
    if missing:
        raise ManifestError(f"manifest is missing field(s): {', '.join(missing)}")
    return body


def write_manifest(run_dir: Path, body: dict[str, Any]) -> dict[str, Any]:
    """Sign ``body``, write it to ``RUN/manifest.json`` atomically, and return the signed manifest."""
    signed = sign(json.loads(json.dumps(body, default=str)))
    atomic.write_text(Path(run_dir) / MANIFEST_NAME, json.dumps(signed, sort_keys=True, indent=1) + "\n")
    return signed
