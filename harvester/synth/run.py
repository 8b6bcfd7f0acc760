"""Synthesized data, the driver: derive a project's source data from the project, and prove its tests pass.

``synthesize(root, project, seed, work)`` runs on an exported project (packages vendored, compat patch
applied) that ships no data for its sources:

1. ``dbt parse`` (sandboxed) gives the manifest: the sources, their YAML columns and types, the tests;
2. a first contract (YAML and tests) is rendered as seeds plus the ``source`` override, and ``dbt seed`` +
   ``dbt compile`` give every model's compiled SQL; the contract is derived again with the SQL's evidence
   (``usage.analyse``: columns read, casts, literals, null handling, joins). A model whose compile queries a
   model no compile builds (``dbt_utils.get_query_results_as_dict`` over a ``ref``) is left out of the
   compile with its children, one at a time, so that the models it reads still give their evidence; then
   every other model is built on that contract's data and the whole project compiled, so that the models
   left out give theirs too;
3. the project is built on the rendered data, its tests not gating its models (``baseline.ungated_build``). A failing project test that the contract can answer (a
   ``unique``, ``not_null``, ``accepted_values``, ``relationships``, range or length test on a column read
   from a source)
   tightens the contract and the build runs again, at most ``MAX_ROUNDS`` times; so does a model whose build
   fails on a cast DuckDB names the source column of (the column is drawn again with the type the cast wants). What still fails is refused
   (``SynthesisError``), naming the tests; so is a model that does not build.

The result is a patch that only adds files (``render``); ``harvest add --synthesize-data`` applies it to the
source before the gold builds and records its sha256 and seed in the pin. Rebuilding the pin derives it
again from the same commit and seed and must reproduce the digest.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.patching import parse_patch
from dbt_harvest.harvester.baseline import ungated_build
from dbt_harvest.harvester.build import BuildResult
from dbt_harvest.harvester.discovery import Project, project_files
from dbt_harvest.harvester.sandbox import DbtStep, Limits, run_steps, safe_fs, write_profile
from dbt_harvest.harvester.synth.contract import (
    Contract,
    Failure,
    accepted,
    bounds_of,
    derive,
    model_sql,
    relations,
    repair,
    retype_from_error,
    test_kind,
    test_kwargs,
    test_target,
    to_relation,
)
from dbt_harvest.harvester.synth.generate import generate
from dbt_harvest.harvester.synth.render import MACRO_FILE, files, patch_text
from dbt_harvest.harvester.synth.usage import ColumnRef, resolve_output

#: bumped when the derivation changes what it writes (a pin records the digest, not the version)
SYNTH_VERSION = 2
#: builds on synthesized data after the first, each after a repair of the contract
MAX_ROUNDS = 3
#: builds after a model failed on a cast DuckDB names the source column of, each column retyped in turn (one
#: error a build: a real project's marts cast five of its synthesized keys, and three rounds shared with the
#: repairs ran out)
MAX_RETYPES = 12
#: the wall clock of synthesis's own builds (the pin's clock is chosen afterwards, from the seeds)
SYNTH_CLOCK = "2025-01-01T00:00:00"
_MANIFEST_BYTES = 1 << 30


class SynthesisError(HarvestError):
    """The project's data cannot be synthesized (no sources, a model that does not build on it, a project
    test the synthesized data cannot satisfy): the message says which."""


@dataclass(frozen=True)
class Synthesis:
    """Synthesized data for one project: the patch that adds it, and how it was made."""

    patch: str
    seed: int
    contract: Contract
    rounds: int  # builds on synthesized data it took

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.patch.encode()).hexdigest()


def _copy(root: Path, dest: Path) -> Path:
    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(root, dest, symlinks=True)
    return dest


def _manifest(workspace: Path, project_dir: str) -> dict[str, Any]:
    rel = "target/manifest.json" if project_dir in ("", ".") else f"{project_dir}/target/manifest.json"
    if not safe_fs.is_file(workspace, rel):
        return {}
    data = json.loads(safe_fs.read_text(workspace, rel, max_bytes=_MANIFEST_BYTES))
    return data if isinstance(data, dict) else {}


def _run(
    workspace: Path, project: Project, steps: Sequence[Any], sandboxed: bool, limits: Limits, log: Path
) -> tuple[bool, str]:
    """Run ``steps``; whether all of them ran and passed, and the first error when not."""
    write_profile(workspace, project.rel_dir, project.profile, project.schema)
    run = run_steps(
        workspace,
        project.rel_dir,
        list(steps),
        clock=SYNTH_CLOCK,
        sandboxed=sandboxed,
        limits=limits,
        log_path=log,
        stop_on_failure=True,
    )
    ok = all(step.ok for step in run.steps) and len(run.steps) == len(steps)
    first = next((s.first_error for s in run.steps if not s.ok and s.first_error), "") or run.killed_reason or ""
    return ok, " ".join(first.split())[:300]


def _render(contract: Contract, project: Project, seed: int) -> dict[str, str]:
    return files(contract, generate(contract, seed), project.rel_dir, project.seed_paths[0], project.macro_paths[0])


def _write(workspace: Path, added: Mapping[str, str]) -> None:
    for rel, text in added.items():
        safe_fs.write_text(workspace, rel, text)


#: models left out of the first compile, one a try, because compiling them queries the database
MAX_COMPILE_EXCLUSIONS = 5
#: a model whose compile failed at run time or in compilation (dbt_utils' ``get_column_values`` raises a
#: compilation error): it may have queried (``run_query``, ``get_query_results_as_dict``) a relation that
#: ``dbt compile`` does not build
_RUNTIME_IN_MODEL = re.compile(r"(?:Runtime|Compilation) Error in model (\w+) \(")


def _querying_model(error: str) -> str | None:
    """The model whose compile-time query failed, as ``error`` (a compile step's first error) names it."""
    m = _RUNTIME_IN_MODEL.search(error)
    return m[1] if m else None


_SOURCE_MACRO = re.compile(r"\{%-?\s*macro\s+source\s*\(")


def _overrides_source(root: Path, project: Project) -> str | None:
    """A macro file of the project that already defines ``source`` (two overrides cannot both win)."""
    for rel in project_files(root, project, project.macro_paths, (".sql",)):
        text = safe_fs.read_text(root, rel, errors="replace")
        if _SOURCE_MACRO.search(text) or rel.endswith("/" + MACRO_FILE):
            return rel
    return None


def failures_of(
    failed: Sequence[str], manifest: Mapping[str, Any], compiled: Mapping[str, str] | None = None
) -> tuple[list[Failure], list[str]]:
    """The failed tests the contract can answer, and the names of those it cannot. ``compiled``: the models'
    SQL from an earlier compile, for the models ``manifest`` holds none of (the manifest a ``dbt test`` writes
    compiles the tests alone, so a failed test on a model column could not be traced to its source)."""
    names = relations(manifest)
    models = {**(compiled or {}), **model_sql(manifest)}
    seeds = set(names.values())
    nodes = manifest.get("nodes", {})
    answerable: list[Failure] = []
    unanswerable: list[str] = []
    for uid in failed:
        node = nodes.get(uid, {})
        meta = node.get("test_metadata") or {}
        kwargs = test_kwargs(meta)
        column = str(kwargs.get("column_name") or "").strip('"').lower()
        relation = test_target(node, manifest, names)
        refs = resolve_output(models, seeds, relation, column) if relation and column else []
        test = test_kind(str(meta.get("name") or ""))
        bounds = bounds_of(test, kwargs)
        parent: ColumnRef | None = None
        if test == "relationships":
            parent_rel = to_relation(str(kwargs.get("to") or ""), manifest, names)
            field = str(kwargs.get("field") or "").strip('"').lower()
            parents = resolve_output(models, seeds, parent_rel, field) if parent_rel and field else []
            parent = parents[0] if parents else None
        if refs and (test in {"unique", "not_null", "accepted_values"} or parent is not None or bounds):
            answerable.append(Failure(test, tuple(refs), accepted(kwargs), parent, bounds))
        else:
            unanswerable.append(str(node.get("name") or uid))
    return answerable, unanswerable


@dataclass(frozen=True)
class _FirstContract:
    """The contract the first build is drawn from; the compile's first error ('' when it compiled); the models'
    compiled SQL (relation name -> SQL) that the contract read."""

    contract: Contract
    error: str
    models: Mapping[str, str]


def _first_contract(
    root: Path, project: Project, seed: int, work: Path, sandboxed: bool, limits: Limits
) -> _FirstContract:
    """The contract from ``dbt parse`` (sources, YAML, tests), then again with the SQL's evidence once a first
    rendering lets ``dbt seed`` + ``dbt compile`` give every model's compiled SQL; with the compile's first
    error where it failed (the contract then holds what the YAML says alone)."""
    parse_ws = _copy(root, work / "parse")
    parsed, why = _run(parse_ws, project, [DbtStep(("parse",))], sandboxed, limits, work / "parse.log")
    if not parsed:
        raise SynthesisError(f"dbt parse failed on the project: {why or 'see ' + str(work / 'parse.log')}")
    manifest = _manifest(parse_ws, project.rel_dir)
    if not relations(manifest):
        raise SynthesisError(
            "the project declares no sources: there is no source data to synthesize (drop --synthesize-data)"
        )
    contract = derive(manifest)
    excluded: list[str] = []
    while True:
        compile_ws = _copy(root, work / "compile")
        _write(compile_ws, _render(contract, project, seed))
        exclude = ("--exclude", *(f"{name}+" for name in excluded)) if excluded else ()
        steps = [DbtStep(("seed",)), DbtStep(("compile", *exclude))]
        compiled_ok, why = _run(compile_ws, project, steps, sandboxed, limits, work / "compile.log")
        failing = _querying_model(why)
        if compiled_ok or failing is None or failing in excluded or len(excluded) >= MAX_COMPILE_EXCLUSIONS:
            break
        excluded.append(failing)  # it queries a model no compile has built: compiled without it and its children
    if compiled_ok and excluded:
        # the models left out are compiled too once the models they query exist: built from a contract
        # that already holds the evidence of every other model, so that their SQL gives its own
        partial = _manifest(compile_ws, project.rel_dir)
        contract, models = derive(partial), model_sql(partial)
        full_ws = _copy(root, work / "compile-all")
        _write(full_ws, _render(contract, project, seed))
        run = DbtStep(("run", "--exclude", *(f"{name}+" for name in excluded)))
        steps = [DbtStep(("seed",)), run, DbtStep(("compile",))]
        compiled_all, why_all = _run(full_ws, project, steps, sandboxed, limits, work / "compile-all.log")
        if not compiled_all:  # a model left out failed for another reason than a query (its own raise): named
            return _FirstContract(contract, why_all or f"see {work / 'compile-all.log'}", models)
        full = _manifest(full_ws, project.rel_dir)
        return _FirstContract(derive(full), "", {**models, **model_sql(full)})
    if compiled_ok:
        compiled = _manifest(compile_ws, project.rel_dir)
        return _FirstContract(derive(compiled), "", model_sql(compiled))
    # a model that cannot compile yet is read from its YAML alone; the build says whether that was enough
    compiled = _manifest(compile_ws, project.rel_dir)
    if compiled:
        contract = derive(compiled)
    return _FirstContract(contract, why or f"see {work / 'compile.log'}", model_sql(compiled))


def synthesize(
    root: Path,
    project: Project,
    seed: int,
    work: Path,
    *,
    sandboxed: bool = True,
    limits: Limits | None = None,
) -> Synthesis:
    """Synthesized data for the project at ``root``/``project.rel_dir`` (see the module docstring);
    ``work`` is a scratch folder for its workspaces and logs. Raises SynthesisError."""
    limits = limits or Limits()
    work.mkdir(parents=True, exist_ok=True)
    clash = _overrides_source(root, project)
    if clash is not None:
        raise SynthesisError(
            f"the project already overrides dbt's source macro ({clash}); synthesized data cannot route its sources"
        )
    first = _first_contract(root, project, seed, work, sandboxed, limits)
    contract, compile_error = first.contract, first.error
    # where the first compile failed, the data holds what the YAML says alone: a build that then fails on a
    # missing column was caused by the compile's error, which the refusal names
    cause = (
        f" (the first compile failed, so only the YAML's columns were synthesized: {compile_error})"
        if compile_error
        else ""
    )
    last: BuildResult | None = None
    rounds = repairs = retypes = 0
    while True:
        rounds += 1
        round_no = rounds
        ws = _copy(root, work / f"build{round_no}")
        added = _render(contract, project, seed)
        _write(ws, added)
        # the project's tests do not gate its models (baseline.ungated_build): every model's build and every
        # test's outcome are known in one round
        last = ungated_build(
            ws,
            project.rel_dir,
            project.profile,
            project.schema,
            SYNTH_CLOCK,
            sandboxed=sandboxed,
            limits=limits,
            log_path=work / f"build{round_no}.log",
            db_file="build.duckdb",
        )
        if not last.models_ok:
            retyped = retype_from_error(contract, last.first_error) if retypes < MAX_RETYPES else contract
            if retyped == contract:
                raise SynthesisError(f"the project does not build on synthesized data: {last.first_error}{cause}")
            contract = retyped  # a cast named the column whose type the SQL needs: drawn again with it
            retypes += 1
            continue
        if last.tests_failed == 0:
            return Synthesis(patch_text(added), seed, contract, round_no)
        if repairs >= MAX_ROUNDS:
            break
        answerable, _ = failures_of(last.failed_tests, _manifest(ws, project.rel_dir), first.models)
        repaired = repair(contract, answerable)
        if repaired == contract:
            break
        contract = repaired
        repairs += 1
    shown = ", ".join(_test_name(t) for t in last.failed_tests[:6])
    more = f" and {len(last.failed_tests) - 6} more" if len(last.failed_tests) > 6 else ""
    raise SynthesisError(
        f"{len(last.failed_tests)} project test(s) still fail on synthesized data after {repairs} repair "
        f"round(s): {shown}{more}"
    )


def _test_name(unique_id: str) -> str:
    """``test.<project>.<name>[.<hash>]`` -> ``<name>``."""
    parts = unique_id.split(".")
    return parts[2] if len(parts) >= 3 else unique_id


def patch_files(patch: str) -> tuple[str, ...]:
    """The files a synthesized data patch adds (what `harvest show` lists)."""
    return tuple(sorted(p.path for p in parse_patch(patch)))


__all__ = ["MAX_RETYPES", "MAX_ROUNDS", "SYNTH_VERSION", "Synthesis", "SynthesisError", "patch_files", "synthesize"]
