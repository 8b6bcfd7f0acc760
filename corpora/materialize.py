"""A dataset row -> a runnable task on this machine, with nothing from our task store.

``harvest tasks materialize DATASET INSTANCE_ID OUT/`` and the environment built from a dataset row
(``eval.env``) both start here. DATASET is a folder written by ``harvest dataset build`` (its manifest is
re-hashed first) or a Hub repository id (rows through ``load_dataset``, the gold file through
``hf_hub_download``). The row alone says how to rebuild the task (``corpora.features``): the repository at
``origin_url`` is fetched at ``base_commit`` (or found in ``--repo-mirror DIR`` as ``DIR/<owner>/<name>``,
``DIR/<owner>__<name>``, either with ``.git``), its export is checked against the row's git ``tree`` id,
the packages are vendored at their recorded commits (from their origins, or the package mirror,
``$HARVEST_PACKAGE_MIRROR``), the compat patch is checked against its sha256 and applied, then the broken
patch. The gold file is checked against ``gold_sha256`` (its bytes' or its tables' digest).

``OUT/`` after materialize::

    project/            the broken workspace an agent gets (no .git, no gold), with
                        <project_dir>/profiles.yml for running dbt by hand there (DuckDB ``./<database_file>``);
                        untrusted code: build it sandboxed (`harvest score --task ... --workspace`)
    grader/gold.duckdb  the gold tables (the row's gold_sha256 names them: harvester.gold.matches)
    grader/spec.json    the grading spec, Spider 2.0-DBT's duckdb_match parameters
    task.json           the row, plus where each part came from and the hashes checked

Caches (mirrors, package trees, the pin's template, gold) live under ``HARVEST_HOME`` like every other
artefact, so an empty ``HARVEST_HOME`` is a fresh machine. Nothing is half-written: OUT is assembled beside
itself and renamed into place.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.core.clock import hand_build_prefix
from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.patching import parse_patch
from dbt_harvest.core.pin import PackageRecord, Pin, baseline_tests_from, display_name
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.task_record import LocalChecks, TaskRecord
from dbt_harvest.core.toolchain import Toolchain
from dbt_harvest.corpora.features import DATABASE_FILE
from dbt_harvest.harvester.task_tree import TreeSource
from dbt_harvest.harvester.toolchain.releases import TOOLCHAIN_RELEASES

ROW_FORMAT_FIELDS = ("origin_url", "tree", "clock", "packages", "gold_sha256", "database_file")


class MaterializeError(HarvestError):
    """A dataset row cannot be turned into a task here (unknown id, missing repository, hash mismatch...)."""


@dataclass(frozen=True)
class DatasetRef:
    """Where a dataset is: a local folder built by ``harvest dataset build``, or a Hub repository id."""

    name: str
    folder: Path | None  # None: a Hub repository

    @property
    def is_hub(self) -> bool:
        return self.folder is None


def dataset_ref(dataset: str) -> DatasetRef:
    """A local folder when one exists at ``dataset``, else a Hub repo id (``owner/name``)."""
    path = Path(dataset).expanduser()
    if path.is_dir():
        return DatasetRef(dataset, path.resolve())
    if re.fullmatch(r"[A-Za-z0-9][\w.-]*/[\w.-]+", dataset) and not path.exists():
        return DatasetRef(dataset, None)
    raise MaterializeError(
        f"{dataset}: neither a dataset folder (`harvest dataset build --out`) nor a Hub repo id owner/name"
    )


def load_rows(ref: DatasetRef, split: str | None = None) -> dict[str, list[dict[str, Any]]]:
    """split -> rows: a local folder's from the bytes its manifest vouches for (``_verified_rows``), a Hub
    repository's through ``datasets.load_dataset``."""
    if split == "test":
        raise MaterializeError("the test split is sealed and never part of a dataset")
    if ref.folder is not None:
        return _verified_rows(ref.folder, split)
    from datasets import load_dataset

    try:
        loaded = load_dataset(ref.name)
    except Exception as exc:
        raise MaterializeError(f"cannot load dataset {ref.name}: {' '.join(str(exc).split())[:300]}") from None
    splits = [split] if split else list(loaded)
    missing = [s for s in splits if s not in loaded]
    if missing:
        raise MaterializeError(f"dataset {ref.name} has no split {missing[0]!r} (it has {', '.join(loaded)})")
    return {s: [dict(r) for r in loaded[s]] for s in splits}


def _verified_rows(folder: Path, split: str | None) -> dict[str, list[dict[str, Any]]]:
    """A built folder's rows, parsed from the very bytes whose sha256 the manifest was just checked against
    (``load_dataset(folder)`` could answer from the ``datasets`` cache for a parquet file rewritten in place
    with the same size and mtime)."""
    import hashlib

    import pyarrow as pa
    import pyarrow.parquet as pq

    from dbt_harvest.corpora.build import read_manifest
    from dbt_harvest.harvester.sandbox import safe_fs

    manifest = read_manifest(folder)
    shards: dict[str, list[str]] = {}
    for rel in sorted(manifest["files"]):
        path = PurePosixPath(rel)
        if len(path.parts) == 2 and path.parts[0] == "data" and path.suffix == ".parquet":
            shards.setdefault(path.name.split("-", 1)[0], []).append(rel)
    splits = (
        [split] if split else sorted(shards, key=lambda s: ("train", "dev").index(s) if s in ("train", "dev") else 9)
    )
    missing = [s for s in splits if s not in shards]
    if missing:
        raise MaterializeError(f"dataset {folder} has no split {missing[0]!r} (it has {', '.join(shards) or 'none'})")
    out: dict[str, list[dict[str, Any]]] = {}
    for name in splits:
        rows: list[dict[str, Any]] = []
        for rel in shards[name]:
            try:
                data = safe_fs.read_bytes(folder, rel, max_bytes=1 << 31)
            except safe_fs.UnsafePathError as exc:
                raise MaterializeError(f"{folder}: {rel} cannot be read ({exc})") from None
            if hashlib.sha256(data).hexdigest() != manifest["files"][rel]:
                raise MaterializeError(f"{folder}: {rel} changed since the build (sha256 differs); rebuild the dataset")
            try:
                rows += pq.read_table(pa.BufferReader(data), use_threads=False, pre_buffer=False).to_pylist()
            except (pa.ArrowException, OSError) as exc:
                raise MaterializeError(f"{folder}: {rel} is not a readable parquet file ({exc})") from None
        out[name] = rows
    return out


def find_row(rows: dict[str, list[dict[str, Any]]], instance_id: str, dataset: str) -> tuple[str, dict[str, Any]]:
    """(split, row) of ``instance_id``, the row checked as untrusted input (``corpora.untrusted.check_row``:
    ids, paths, URLs, bounds) before any field of it is used; MaterializeError when no split holds it."""
    from dbt_harvest.corpora.untrusted import check_row

    for split, items in rows.items():
        for row in items:
            if row.get("instance_id") == instance_id:
                missing = [f for f in ROW_FORMAT_FIELDS if f not in row]
                if missing:
                    raise MaterializeError(
                        f"{instance_id}: this row was built before rows were self-contained (no {', '.join(missing)}); "
                        "rebuild the dataset with `harvest dataset build`"
                    )
                check_row(row)
                return split, row
    raise MaterializeError(f"no task {instance_id!r} in dataset {dataset}")


# ----------------------------------------------------------------------------------- row -> records


def row_pin(row: dict[str, Any]) -> Pin:
    """The part of a pin a row carries: enough to export, vendor, patch and build (no table records)."""
    return Pin(
        id=row["pin"],
        spec=f"{row['repo']}@{row['base_commit']}",
        url=row["origin_url"],
        commit=row["base_commit"],
        tree=row["tree"],
        ref="",
        root_commits=(),
        project_dir=row["project_dir"],
        project_name=row["project_name"],
        profile_schema=row["profile_schema"],
        clock=row["clock"],
        license=row["license"],
        created_at="",
        gold_sha256=row["gold_sha256"],
        compat_patch_sha256=row["compat_patch_sha256"],
        augmentation_sha256=row.get("augmentation_patch_sha256", ""),
        augments=row["pin"].split("+aug-", 1)[0] if row.get("augmentation_patch_sha256") else "",
        synthesis_sha256=row.get("synthesis_patch_sha256", ""),
        port_from=str(row.get("dialect") or "").removeprefix("ported:") if row.get("port_patch_sha256") else "",
        port_sha256=row.get("port_patch_sha256", ""),
        ported_files=tuple(p.path for p in parse_patch(row["port_patch"])) if row.get("port_patch") else (),
        fix_commit=row.get("fix_commit", ""),
        fix_files=tuple(row.get("fix_files") or ()),
        fix_sha256=row.get("fix_sha256", ""),
        fix_date=row.get("fix_date", ""),
        mined_from=row["pin"].split("+fix-", 1)[0] if row.get("fix_commit") else "",
        versions={v["name"]: v["version"] for v in row["versions"]},
        packages=tuple(PackageRecord(**p) for p in row["packages"]),
        tables=(),
        # a dataset built before baseline tests has no column: nothing was excluded then
        baseline_tests=baseline_tests_from(list(row.get("baseline_tests") or ()), f"row {row['instance_id']}"),
        database=str(row.get("database_file") or DATABASE_FILE).removesuffix(".duckdb"),
        compat_edits=tuple(row.get("compat_edits") or ()),
        toolchain=row_toolchain({v["name"]: v["version"] for v in row["versions"]}),
    )


def row_toolchain(versions: dict[str, str]) -> Toolchain | None:
    """The toolchain a row's versions name: a supported toolchain release's exact dbt-core, dbt-duckdb and
    DuckDB (its lock stays in the pin: the row's toolchain is resolved from the three), else None (the
    installed dbt, as for every row of a pin without a toolchain)."""
    wanted = (versions.get("dbt-core"), versions.get("dbt-duckdb"), versions.get("duckdb"))
    for release in TOOLCHAIN_RELEASES:
        if (release.dbt_core, release.dbt_duckdb, release.duckdb) == wanted:
            return Toolchain(release.dbt_core, release.dbt_duckdb, release.duckdb, ())
    return None


def row_spec(row: dict[str, Any]) -> GradingSpec:
    """The row's grading spec (gold named by its file in the dataset)."""
    return GradingSpec.from_dict(
        {
            "gold": row["gold_file"],
            "condition_tabs": row["condition_tabs"],
            "condition_cols": row["condition_cols"],
            "ignore_orders": row["ignore_orders"],
        }
    )


def row_task(row: dict[str, Any], split: str) -> TaskRecord:
    """A task record from a public row: no wrong repairs (they are never published)."""
    checks = row["local_checks"]
    return TaskRecord(
        instance_id=row["instance_id"],
        pin=row["pin"],
        repo=row["repo"],
        base_commit=row["base_commit"],
        project_dir=row["project_dir"],
        split=split,
        split_group=row["split_group"],
        family=row["family"],
        operator=row["operator"],
        effect=row["effect"],
        file=row["file"],
        broken_patch=row["broken_patch"],
        fix_patch=row["patch"],
        wrong_repair_patches=(),
        grading=row_spec(row),
        problem_statement=row["problem_statement"],
        local_checks=LocalChecks(bool(checks["builds"]), int(checks["tests_total"]), int(checks["tests_failed"])),
        gold_sha256=row["gold_sha256"],
        license=row["license"],
        versions={v["name"]: v["version"] for v in row["versions"]},
        generator_version=row["generator_version"],
        weak=bool(row["weak"]),
        kind=str(row.get("kind") or "repair"),  # a dataset built before completions has no kind column
        # and one built before history tasks has no source columns
        source=str(row.get("source") or "mutation"),
        fix_commit=str(row.get("fix_commit") or ""),
        fix_date=str(row.get("fix_date") or ""),
        fix_subject=str(row.get("fix_subject") or ""),
    )


# ------------------------------------------------------------------------------------ fetching parts


def mirror_location(origin_url: str, repo_mirror: Path | None) -> str | None:
    """Where ``--repo-mirror DIR`` holds the repository at ``origin_url`` (None: fetch from the URL)."""
    if repo_mirror is None:
        return None
    name = display_name(origin_url)
    name = name.split("://", 1)[1] if "://" in name else name
    parts = [p for p in name.rstrip("/").removesuffix(".git").split("/") if p][-2:]
    if len(parts) != 2:
        raise MaterializeError(f"cannot name {origin_url} as owner/name to find it in {repo_mirror}")
    owner, repo = parts
    for candidate in (
        Path(owner) / repo,
        Path(owner) / f"{repo}.git",
        Path(f"{owner}__{repo}"),
        Path(f"{owner}__{repo}.git"),
    ):
        if (repo_mirror / candidate).is_dir():
            return str((repo_mirror / candidate).resolve())
    raise MaterializeError(
        f"{repo_mirror} holds no copy of {owner}/{repo} (looked for {owner}/{repo}[.git] and {owner}__{repo}[.git])"
    )


def gold_for(ref: DatasetRef, row: dict[str, Any]) -> Path:
    """The row's gold file, installed (verified) into HARVEST_HOME/gold, where the grader reads it."""
    from dbt_harvest.core.home import gold_dir
    from dbt_harvest.harvester.gold import matches

    sha = row["gold_sha256"]
    target = gold_dir() / f"{sha}.duckdb"
    if target.is_file() and matches(target, sha):
        return target
    if ref.folder is not None:
        from dbt_harvest.harvester.sandbox import safe_fs

        source = ref.folder / row["gold_file"]  # the row was checked: a relative path with no '..'
        entry = safe_fs.lstat(ref.folder, row["gold_file"])  # beneath the dataset folder, no link followed
        if entry is None or entry.kind != "file":
            raise MaterializeError(
                f"{ref.name}: the gold file {row['gold_file']} is missing (or is not a plain file "
                "inside the dataset folder)"
            )
    else:
        from huggingface_hub import hf_hub_download

        try:
            source = Path(hf_hub_download(ref.name, row["gold_file"], repo_type="dataset"))
        except Exception as exc:
            raise MaterializeError(
                f"cannot download {row['gold_file']} from {ref.name}: {' '.join(str(exc).split())[:200]}"
            ) from None
    if not matches(source, sha):
        raise MaterializeError(
            f"{row['instance_id']}: gold file {row['gold_file']} is not gold {sha[:12]} "
            "(neither its bytes nor its tables hash to that name)"
        )
    atomic.install_file(source, target)
    return target


def row_source(row: dict[str, Any], repo_mirror: Path | None) -> TreeSource:
    """How to rebuild a row's pin tree: the pin as the row states it, its compat, augmentation and
    synthesized data patch texts, the mirror its bytes come from (``harvester.task_tree``: the one way every consumer materializes
    a task)."""
    return TreeSource(
        row_pin(row),
        row["compat_patch"],
        mirror_location(row["origin_url"], repo_mirror),
        row.get("augmentation_patch", ""),
        row.get("synthesis_patch", ""),
        row.get("port_patch", ""),
    )


# --------------------------------------------------------------------------------------- materialize


@dataclass(frozen=True)
class Materialized:
    """What ``materialize_task`` wrote and checked."""

    out: Path
    instance_id: str
    split: str
    project: Path
    gold: Path
    gold_sha256: str
    tree: str
    checks: tuple[str, ...]
    # how to build the project by hand as the harvester does (core.clock.hand_build_prefix: the frozen clock,
    # the hash seed), its known failing tests left out (baseline_tests)
    build: str = "dbt seed && dbt build"

    def to_dict(self) -> dict[str, Any]:
        return {
            "out": str(self.out),
            "instance_id": self.instance_id,
            "split": self.split,
            "project": str(self.project),
            "gold": str(self.gold),
            "gold_sha256": self.gold_sha256,
            "tree": self.tree,
            "checks": list(self.checks),
            "build": self.build,
        }


def materialize_task(
    dataset: str, instance_id: str, out: Path, *, repo_mirror: Path | None = None, split: str | None = None
) -> Materialized:
    """Write ``out`` (see the module docstring) for ``instance_id`` of ``dataset``; all or nothing."""
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.sandbox.profile import plain_profile_text
    from dbt_harvest.harvester.task_tree import broken_tree

    out = Path(out).absolute()  # a relative OUT: the partial folder beside it is compared with absolute paths
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise MaterializeError(f"{out} already exists and is not an empty folder; name a new one")
    ref = dataset_ref(dataset)
    task_split, row = find_row(load_rows(ref, split), instance_id, dataset)
    source = row_source(row, repo_mirror)
    spec = row_spec(row)
    gold = gold_for(ref, row)
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))
    try:
        project = staging / "project"
        try:
            broken_tree(source, row["broken_patch"], project)
            found = discover(project, row["project_dir"])
            profiles = project / row["project_dir"] / "profiles.yml"
            if profiles.is_dir() and not profiles.is_symlink():
                shutil.rmtree(profiles)
            elif profiles.is_symlink() or profiles.exists():  # never write through a link the tree planted
                profiles.unlink()
            atomic.write_text(profiles, plain_profile_text(found.profile, row["profile_schema"], row["database_file"]))
        except HarvestError as exc:
            raise MaterializeError(f"{instance_id}: the task cannot be rebuilt ({exc})") from None
        (staging / "grader").mkdir()
        shutil.copyfile(gold, staging / "grader" / "gold.duckdb")
        atomic.write_text(
            staging / "grader" / "spec.json", json.dumps({**spec.to_dict(), "gold": "gold.duckdb"}, indent=1) + "\n"
        )
        checks = (
            f"tree {row['tree'][:12]} (git export of {row['base_commit'][:12]})",
            f"gold sha256 {row['gold_sha256'][:12]}",
            *([f"compat patch sha256 {row['compat_patch_sha256'][:12]}"] if row["compat_patch_sha256"] else []),
            f"{len(row['packages'])} package(s) at their recorded commits",
        )
        record = {
            "dataset": ref.name,
            "split": task_split,
            "row": row,
            "checked": list(checks),
            "profile": found.profile,
        }
        atomic.write_text(staging / "task.json", json.dumps(record, indent=1, sort_keys=True, default=str) + "\n")
        if out.exists():
            out.rmdir()
        staging.rename(out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    excluded = source.pin.excluded_tests
    dbt = "dbt seed && dbt build" + (" --exclude " + " ".join(f"'{e}'" for e in excluded) if excluded else "")
    build = f'{hand_build_prefix(row["clock"])} sh -c "{dbt}"'  # in project/, as every build of the task ran
    return Materialized(
        out,
        instance_id,
        task_split,
        out / "project",
        out / "grader" / "gold.duckdb",
        row["gold_sha256"],
        row["tree"],
        checks,
        build,
    )


def load_task(
    dataset: str, instance_id: str, split: str | None = None
) -> tuple[TaskRecord, dict[str, Any], DatasetRef]:
    """(task record, row, where) of one row, the gold installed and verified (what `harvest score --task` needs)."""
    ref = dataset_ref(dataset)
    task_split, row = find_row(load_rows(ref, split), instance_id, dataset)
    gold_for(ref, row)
    return row_task(row, task_split), row, ref
