"""Distinguishing data, the driver: recover candidates the pin's seeds could not tell from the original.

``recover(pins, options, target)`` runs after a pin's mint:

1. every candidate its reports reject as ``equivalent``/``invisible`` (families ``derive.FAMILIES``)
   gets a proposal: the one seed row that makes mutant and original differ (``derive.propose``, which
   traces the columns the node reads back to seed columns through the models, ``augment/trace.py``; the
   time probe evaluates both comparisons in the locked-down DuckDB at the pinned clock), screened in
   DuckDB; a candidate rejected for want of an informative wrong repair (``no_wrong_repair``) gets one
   only where the derivation has rows aimed at its wrong repairs (``Proposal.extra``);
2. the rows of all proposals become ONE seed patch (identical rows once), and an augmented pin is
   made from it like ``harvest add`` makes any pin (``augmented_pin``): the base pin's tree + the
   patch, built twice sandboxed at the base pin's clock, gold and state installed. The augmentation
   is kept only if the ORIGINAL project stays healthy on it: it builds, no dbt test fails that passes
   on the base data, every table that was gradable still is, and no table loses more base-gold rows
   than rows were added (the outputs differ only where the added rows reach). Else it is discarded
   (``AugmentRejected``), and it is tried without the rows aimed at wrong repairs, then each proposal
   alone (at most ``SINGLE_TRIES``);
3. the augmented pin is minted with the SAME pipeline, restricted to the recovered candidates
   (``MintOptions.only_keys``), into the base pin's split.

The augmented pin records ``augmentation_sha256`` (the patch, stored under ``pins/patches/augmentations/``: derived, never committed; like a
compat patch) and ``augments`` (the base pin id); ``harvester.workspace.populate`` applies it before
every build of every task of that pin, so gold, mutants, repairs, agent builds, rewards and
``harvest tasks verify`` all see the augmented seeds.
"""

from __future__ import annotations

import hashlib
import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dbt_harvest.core import atomic
from dbt_harvest.core.clock import freeze_clock, parse_clock
from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.home import builds_dir, pins_dir
from dbt_harvest.core.locked_duckdb import Lock, bounded, connect_locked
from dbt_harvest.core.patching import apply_patch
from dbt_harvest.core.pin import Pin, TableRecord, pin_path, read_pin, write_pin
from dbt_harvest.harvester.augment.derive import (
    FAMILIES,
    INVISIBLE_REASONS,
    PROBE_DAYS,
    WEAK_REASONS,
    NoProposal,
    Probe,
    Proposal,
    SeedRow,
    SeedTable,
    propose,
    render,
    retemplate,
    upstream_seeds,
)
from dbt_harvest.harvester.augment.trace import Lineage, relation_key
from dbt_harvest.harvester.mint.pipeline import MintOptions, MintTarget, mint
from dbt_harvest.harvester.mint.shard import CandidateReport, ShardJob
from dbt_harvest.harvester.sandbox import Limits

if TYPE_CHECKING:
    from dbt_harvest.harvester.add import GoldBuilds, Source
    from dbt_harvest.harvester.mint.candidates import Candidate
    from dbt_harvest.harvester.mint.engine import Engine
    from dbt_harvest.harvester.mint.lineage import ModelNode

#: proposals tried alone when the augmentation holding all of them is discarded
SINGLE_TRIES = 3
#: wall-time bound of one probe statement (seconds)
PROBE_SECONDS = 10.0
#: seeds tried per candidate (``derive.propose``'s ``choose``) until the screen sees the mutant differ
MAX_ALTERNATIVES = 6
#: rows of a seed tried as templates when a derived row does not reach the mutated model (``reaching_templates``)
MAX_TEMPLATES = 12
#: reaching rows a proposal is re-cloned from after its own template failed the screen
RETEMPLATE_TRIES = 2


class AugmentRejected(HarvestError):
    """An augmentation would make the original project unhealthy (a build or dbt test fails, outputs change
    beyond the added rows); it is discarded."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"augmentation discarded ({reason}): {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class AugmentOptions:
    sandboxed: bool = True
    limits: Limits = Limits()
    families: tuple[str, ...] = FAMILIES
    # a committed augmented pin rebuilt here names its gold by content even where its old (byte) name
    # reproduces (`harvest mint --rename-gold`, the move `harvest add --rebuild --rename-gold` makes for a base)
    rename_gold: bool = False


@dataclass(frozen=True)
class Augmentation:
    """One seed patch tried on a base pin: what it serves, and the augmented pin or why it was discarded."""

    base: str
    keys: tuple[str, ...]
    rows: int
    pin: str = ""  # the augmented pin's id ("" when discarded)
    discarded: str = ""  # AugmentRejected reason
    detail: str = ""
    seconds: float = 0.0


@dataclass(frozen=True)
class RecoverReport:
    """Per family: candidates rejected as invisible, those rejected ``no_wrong_repair``, proposals derived, candidates on a kept augmentation,
    and tasks kept on augmented pins (``recovered``); the augmentations; the seconds spent."""

    families: dict[str, dict[str, int]]
    no_proposal: dict[str, int]
    augmentations: tuple[Augmentation, ...]
    kept_tasks: tuple[str, ...]
    seconds: float = 0.0
    mint_reports: tuple[CandidateReport, ...] = field(default=(), repr=False)

    def to_dict(self) -> dict:
        return {
            "families": self.families,
            "no_proposal": self.no_proposal,
            "kept_tasks": list(self.kept_tasks),
            "seconds": round(self.seconds, 2),
            "augmentations": [a.__dict__ for a in self.augmentations],
        }


def time_probe(clock: str) -> Probe:
    """The probe ``derive.propose`` needs: the day nearest the clock (midnight), or the first of the given
    literals, on which the two comparisons disagree, evaluated in the locked-down DuckDB with the clock
    frozen (no file access)."""
    anchor = parse_clock(clock).strftime("%Y-%m-%d %H:%M:%S")

    def probe(original: str, mutated: str, placeholder: str, values: tuple[str, ...] = ()) -> str | None:
        low, high = PROBE_DAYS
        if values:  # filter values: the first literal (in order) on which the comparisons disagree
            rows = ", ".join(f"({v}, {i})" for i, v in enumerate(values))
            sql = (
                f"SELECT CAST({placeholder} AS VARCHAR) FROM (VALUES {rows}) t({placeholder}, k) "
                f"WHERE ({original}) IS DISTINCT FROM ({mutated}) ORDER BY k LIMIT 1"
            )
        else:  # whole days around the clock, then hours and minutes near it (windows of hours)
            steps = [
                f"SELECT TIMESTAMP '{anchor}' + k * INTERVAL 1 DAY AS {placeholder}, abs(k) * 1440 AS k "
                f"FROM range({low}, {high}) t(k)",
                f"SELECT TIMESTAMP '{anchor}' + k * INTERVAL 1 HOUR AS {placeholder}, abs(k) * 60 + 1 AS k "
                "FROM range(-96, 4) t(k)",
                f"SELECT TIMESTAMP '{anchor}' + k * INTERVAL 1 MINUTE AS {placeholder}, abs(k) + 2 AS k "
                "FROM range(-180, 5) t(k)",
            ]
            sql = (
                f"SELECT strftime({placeholder}, '%Y-%m-%d %H:%M:%S') FROM ({' UNION ALL '.join(steps)}) "
                f"WHERE ({original}) IS DISTINCT FROM ({mutated}) ORDER BY k LIMIT 1"
            )
        con = connect_locked(":memory:")
        try:
            with bounded(con, PROBE_SECONDS):
                row = con.execute(freeze_clock(sql, clock)).fetchone()
        except Exception:
            return None
        finally:
            con.close()
        return None if row is None else str(row[0])

    return probe


def read_seeds(tree: Path, project_dir: str, manifest: dict) -> dict[str, SeedTable]:
    """The root project's seed CSVs (as the pin's tree holds them), by dbt name."""
    out: dict[str, SeedTable] = {}
    for node in manifest.get("nodes", {}).values():
        if node.get("resource_type") != "seed" or not str(node.get("original_file_path", "")).endswith(".csv"):
            continue
        rel = (Path(project_dir) / str(node["original_file_path"])).as_posix()
        path = tree / rel
        if path.is_file() and not path.is_symlink() and path.resolve().is_relative_to(tree.resolve()):
            out[str(node.get("name", "")).lower()] = SeedTable.parse(
                str(node.get("name", "")), rel, path.read_text(encoding="utf-8")
            )
    return out


def lineage_of(manifest: dict, database: Path) -> Lineage:
    """What ``trace`` needs, read from the pin's manifest and built database: every model's compiled SQL,
    every relation's columns, and the seed behind each seed relation (and each source whose table a seed
    of that name builds)."""
    nodes = manifest.get("nodes", {})
    seed_names = {str(n.get("name", "")).lower() for n in nodes.values() if n.get("resource_type") == "seed"}
    seeds: dict[str, str] = {}
    models: dict[str, str] = {}
    for node in [*nodes.values(), *manifest.get("sources", {}).values()]:
        relation = str(node.get("relation_name") or "")
        if not relation:
            continue
        kind = node.get("resource_type")
        if kind == "seed":
            seeds[relation_key(relation)] = str(node.get("name", "")).lower()
        elif kind == "source" and str(node.get("identifier") or node.get("name", "")).lower() in seed_names:
            seeds.setdefault(relation_key(relation), str(node.get("identifier") or node.get("name", "")).lower())
        elif kind == "model" and node.get("compiled_code"):
            models[relation_key(relation)] = str(node["compiled_code"])
    path = str(Path(database).resolve())
    con = connect_locked(":memory:", Lock(allowed_paths=(path, path + ".wal")))
    columns: dict[str, list[str]] = {}
    try:
        con.execute(f"ATTACH '{path}' AS db (READ_ONLY)")
        for cat, schema, table, column in con.execute(
            "SELECT table_catalog, table_schema, table_name, column_name FROM information_schema.columns "
            "WHERE table_catalog = 'db' ORDER BY table_catalog, table_schema, table_name, ordinal_position"
        ).fetchall():
            columns.setdefault(".".join(x.lower() for x in (cat, schema, table)), []).append(column.lower())
    finally:
        con.close()
    # the database is attached as "db"; the project names it by its own catalog
    own = {r.split(".")[0] for r in [*models, *seeds]}
    renamed = {}
    for key, cols in columns.items():
        _, schema_table = key.split(".", 1)
        for cat in own or {"db"}:
            renamed[f"{cat}.{schema_table}"] = tuple(cols)
    return Lineage(models, renamed, seeds)


def _rerun_with(
    pin: Pin,
    manifest: dict,
    nodes: dict,
    seeds: dict[str, SeedTable],
    rows: Sequence,
    scratch: Path,
    model: str,
    touched: Sequence[str] = (),
) -> Engine | None:
    """An Engine over a copy of the pin's built data with ``rows`` inserted into their seeds and the models
    that matter to ``model``'s outputs re-run from their compiled SQL in the locked-down DuckDB (as
    screening re-runs a mutant): ``model``, its descendants, and their ancestors that rows in the seeds
    ``touched`` (default: those of ``rows``) reach (``augment/reach.py``); None where the rows or the
    project's SQL do not run there."""
    from dbt_harvest.harvester.augment.reach import models_to_rerun, seed_feeds
    from dbt_harvest.harvester.mint.engine import Engine
    from dbt_harvest.harvester.mint.lineage import depth
    from dbt_harvest.harvester.state import load_state

    rerun_ids = models_to_rerun(nodes, seed_feeds(manifest), touched or [seed for seed, _ in rows], model)

    scratch.mkdir(parents=True, exist_ok=True)
    db = scratch / "augmented.duckdb"
    shutil.copyfile(load_state(pin.id).database, db)
    catalog = next((n.relation.split(".")[0].strip('"') for n in nodes.values() if n.relation), "build")
    relations = {
        str(n.get("name", "")).lower(): str(n.get("relation_name") or "")
        for n in manifest.get("nodes", {}).values()
        if n.get("resource_type") == "seed"
    }
    con = connect_locked(
        ":memory:",
        Lock(allowed_directories=(str(scratch.resolve()),)),
        setup=(f"ATTACH '{db.resolve()}' AS \"{catalog}\"", f'USE "{catalog}"'),
    )
    try:
        with bounded(con, 120.0):
            for seed_name, values in rows:
                # by position, as dbt loads a seed: the table's column names may differ from the header
                # (a repeated header name is loaded as ``name_2``)
                literals = ", ".join("NULL" if v == "" else "'" + v.replace("'", "''") + "'" for v in values)
                con.execute(f"INSERT INTO {relations[seed_name]} VALUES ({literals})")
            for uid in sorted(rerun_ids, key=lambda u: (depth(nodes, u), u)):
                node = nodes[uid]
                if node.materialized == "ephemeral" or node.language != "sql" or not node.compiled_code:
                    continue
                for kind in ("VIEW", "TABLE"):
                    try:
                        con.execute(f"DROP {kind} IF EXISTS {node.relation}")
                    except Exception:
                        pass
                con.execute(f"CREATE TABLE {node.relation} AS {freeze_clock(node.compiled_code, pin.clock)}")
    except Exception:
        shutil.rmtree(scratch, ignore_errors=True)
        return None
    finally:
        con.close()
    return Engine(db, catalog, scratch / "engine")


def screen_rows(
    pin: Pin,
    manifest: dict,
    nodes: dict,
    seeds: dict[str, SeedTable],
    rows: Sequence,
    model: str,
    mutated_sql: str,
    scratch: Path,
) -> bool:
    """Whether, on the pin's built data plus ``rows`` (re-run through every model in DuckDB, as screening
    re-runs compiled SQL), the mutant's outputs differ from the original's: milliseconds per model instead
    of an augmented pin's two dbt builds."""
    from dbt_harvest.harvester.mint.lineage import descendants
    from dbt_harvest.harvester.mint.screen import _mut_relation, rerun

    engine = _rerun_with(pin, manifest, nodes, seeds, rows, scratch, model)
    if engine is None:
        return False
    try:
        rerun(engine, pin, nodes, model, mutated_sql)
        for uid in [model, *descendants(nodes, model)]:
            node = nodes[uid]
            if node.materialized == "ephemeral":
                continue
            if engine.fingerprint(_mut_relation(node)) != engine.fingerprint(node.relation):
                return True
        return False
    except Exception:
        return False
    finally:
        engine.close()
        shutil.rmtree(scratch, ignore_errors=True)


def _outputs(
    pin: Pin,
    manifest: dict,
    nodes: dict,
    seeds: dict[str, SeedTable],
    rows: Sequence,
    model: str,
    scratch: Path,
    touched: Sequence[str],
) -> tuple | None:
    """The fingerprints of ``model`` and its descendants (those not ephemeral) on the pin's data plus
    ``rows``, re-run as ``screen_rows`` re-runs them (the same models for every ``rows`` in the seeds
    ``touched``, so fingerprints compare like with like); None where they do not run."""
    from dbt_harvest.harvester.mint.lineage import descendants

    engine = _rerun_with(pin, manifest, nodes, seeds, rows, scratch, model, touched)
    if engine is None:
        return None
    try:
        return tuple(
            engine.fingerprint(nodes[uid].relation)
            for uid in [model, *descendants(nodes, model)]
            if nodes[uid].materialized != "ephemeral"
        )
    except Exception:
        return None
    finally:
        engine.close()
        shutil.rmtree(scratch, ignore_errors=True)


def reaching_templates(
    pin: Pin,
    manifest: dict,
    nodes: dict,
    seeds: dict[str, SeedTable],
    seed: str,
    model: str,
    scratch: Path,
    limit: int = MAX_TEMPLATES,
) -> tuple[int, ...]:
    """Rows of ``seed`` (indices, at most ``limit`` tried, in file order) whose twin (a fresh key only)
    changes the outputs of ``model`` or a descendant: real rows that reach the mutated model. A clone of a
    row that a staging filter drops (``where not coalesce(is_intraday, true)``, a soft-deleted row) never
    reaches it, whatever its values."""
    table = seeds.get(seed)
    if table is None or not table.rows:
        return ()
    base = _outputs(pin, manifest, nodes, seeds, [], model, scratch / "reach-base", [seed])
    if base is None:
        return ()
    out = []
    for index in range(min(limit, len(table.rows))):
        _, written = render(seeds, [SeedRow(seed, index, ())])
        if _outputs(pin, manifest, nodes, seeds, written, model, scratch / f"reach-{index}", [seed]) not in (
            None,
            base,
        ):
            out.append(index)
    return tuple(out)


@dataclass(frozen=True)
class _Rejected:
    """A pin's mint reports rejected for want of distinguishing data: the reports, the counts per family
    (``invisible``, ``no_wrong_repair``) and the keys rejected ``no_wrong_repair`` (visible already)."""

    reports: tuple[dict[str, Any], ...]
    per_family: dict[str, dict[str, int]]
    weak: frozenset[str]


@dataclass(frozen=True)
class _Screen:
    """What deriving and screening one pin's proposals reads: its built state, models, tree, seeds, time
    probe and column lineage; the scratch folder of the screens; the reaching templates found so far (by
    seed and model)."""

    pin: Pin
    manifest: dict[str, Any]
    nodes: dict[str, ModelNode]
    tree: Path
    seeds: dict[str, SeedTable]
    probe: Probe
    lineage: Lineage
    scratch: Path
    reaching: dict[tuple[str, str], tuple[int, ...]] = field(default_factory=dict)


def proposals_for(
    pin: Pin, families: Sequence[str]
) -> tuple[list[Proposal], dict[str, dict[str, int]], dict[str, int]]:
    """Proposals for the pin's candidates rejected as invisible, and for those rejected for want of an
    informative wrong repair (``WEAK_REASONS``: only proposals with rows aimed at the wrong repairs, which
    the re-mint then judges); per family the rejected counts (``invisible``, ``no_wrong_repair``); and why
    the others got none (reason -> count)."""
    from dbt_harvest.harvester.mint.candidates import model_candidates

    rejected = _rejected_reports(pin, families)
    if not rejected.reports:
        return [], rejected.per_family, {}
    screen = _screen_of(pin)
    wanted: dict[str, set[str]] = {}
    for r in rejected.reports:
        wanted.setdefault(r["model"], set()).add(r["key"])
    out: list[Proposal] = []
    why: dict[str, int] = {}
    for uid, keys in sorted(wanted.items()):
        node = screen.nodes.get(uid)
        if node is None:
            continue
        upstream = upstream_seeds(screen.manifest, uid)
        for cand in model_candidates(pin, node, screen.tree, families, 0):
            if cand.key not in keys:
                continue
            proposal, reason = _candidate_proposal(screen, cand, uid, node, upstream, cand.key in rejected.weak)
            if proposal is not None:
                out.append(proposal)
            if reason:
                why[reason] = why.get(reason, 0) + 1
    shutil.rmtree(screen.scratch, ignore_errors=True)
    return out, rejected.per_family, why


def _rejected_reports(pin: Pin, families: Sequence[str]) -> _Rejected:
    """The pin's mint reports of the ``families`` rejected as invisible or ``no_wrong_repair``, counted."""
    from dbt_harvest.harvester.mint.pipeline import load_reports

    reports = tuple(
        r
        for r in load_reports(pin.id)
        if not r.get("kept") and r.get("reason") in (*INVISIBLE_REASONS, *WEAK_REASONS) and r.get("family") in families
    )
    per_family: dict[str, dict[str, int]] = {}
    weak: set[str] = set()
    for r in reports:
        group = "no_wrong_repair" if r["reason"] in WEAK_REASONS else "invisible"
        counts = per_family.setdefault(r["family"], {"invisible": 0, "no_wrong_repair": 0})
        counts[group] += 1
        if group == "no_wrong_repair":
            weak.add(r["key"])
    return _Rejected(reports, per_family, frozenset(weak))


def _screen_of(pin: Pin) -> _Screen:
    """The pin's state, seeds, probe and lineage read once, and a fresh scratch folder for its screens."""
    from dbt_harvest.harvester.mint.lineage import models
    from dbt_harvest.harvester.state import load_state
    from dbt_harvest.harvester.workspace import template

    state = load_state(pin.id)
    nodes = models(state.manifest)
    tree = template(pin)
    seeds = read_seeds(tree, pin.project_dir, state.manifest)
    probe = time_probe(pin.clock)
    lineage = lineage_of(state.manifest, state.database)
    scratch = Path(
        tempfile.mkdtemp(
            prefix="augment-screen-",
            dir=builds_dir().parent / "tmp" if (builds_dir().parent / "tmp").is_dir() else None,
        )
    )
    return _Screen(pin, state.manifest, nodes, tree, seeds, probe, lineage, scratch)


def _candidate_proposal(
    screen: _Screen, cand: Candidate, uid: str, node: ModelNode, upstream: frozenset[str], weak: bool
) -> tuple[Proposal | None, str]:
    """One candidate's proposal (the first alternative the screen sees reach the mutant; for a ``weak``
    candidate, visible already, the first only if it has rows aimed at the wrong repairs), or None and why
    ("" when the derivation gives up without a reason)."""
    from dbt_harvest.mutators import transplant

    placed = transplant(cand.mutation.edit, cand.original, node.compiled_code)
    if placed is None:
        return None, "untransplantable"
    compiled = node.compiled_code
    mutated = placed.apply(compiled)
    reason = ""
    for choose in range(MAX_ALTERNATIVES):
        try:
            proposal = propose(
                cand.key,
                cand.mutation.family,
                cand.mutation.operator,
                compiled[placed.start : placed.end],
                placed.replacement,
                compiled,
                mutated,
                tuple(screen.seeds.values()),
                upstream,
                screen.probe,
                choose,
                screen.lineage,
            )
        except NoProposal as exc:
            return None, reason or str(exc)
        if weak:  # visible already: only rows that make a wrong repair differ help
            if proposal.extra:
                return replace(proposal, for_wrong_repair=True), ""
            return None, "no informative wrong repair, and no row derived for one"
        found = _screened(screen, proposal, uid, mutated, cand.key)
        if found is not None:
            return found, ""
        reason = "rows derived, but the mutant still equals the original on them (screened)"
    return None, reason


def _screened(screen: _Screen, proposal: Proposal, uid: str, mutated: str, key: str) -> Proposal | None:
    """The proposal if the screen sees its rows make the mutant differ, else the same values cloned from one
    of the first ``RETEMPLATE_TRIES`` other rows that reach the model and do; None when none does."""
    pin, manifest, nodes, seeds = screen.pin, screen.manifest, screen.nodes, screen.seeds
    _, written = render(seeds, list(proposal.rows))
    if screen_rows(pin, manifest, nodes, seeds, written, uid, mutated, screen.scratch / key):
        return proposal
    # the clone's template may be a row that never reaches the model (a staging filter drops
    # it): the same values on a real row that does reach it
    reach_key = (proposal.row.seed, uid)
    if reach_key not in screen.reaching:
        screen.reaching[reach_key] = reaching_templates(
            pin, manifest, nodes, seeds, proposal.row.seed, uid, screen.scratch / "reach"
        )
    for index in [i for i in screen.reaching[reach_key] if i != proposal.row.template][:RETEMPLATE_TRIES]:
        moved = retemplate(proposal, index)
        _, written = render(seeds, list(moved.rows))
        if screen_rows(pin, manifest, nodes, seeds, written, uid, mutated, screen.scratch / f"{key}-{index}"):
            return moved
    return None


class AugmentRebuildError(HarvestError):
    """A committed augmented pin does not rebuild here to the gold it records (or its base is not built)."""


def augmented_pin(
    base: Pin,
    patch_text: str,
    added_rows: int,
    options: AugmentOptions = AugmentOptions(),
    recovers: Sequence[tuple[str, str]] = (),
) -> Pin:
    """Build ``base`` + ``patch_text`` like ``harvest add`` builds a pin (twice, sandboxed, at the base
    clock), check the original project stays healthy, and write the augmented pin, recording the
    candidates it was made for (``recovers``: (model, key) pairs); AugmentRejected if not healthy.

    The pin's id is the patch's hash, so the same rows give the same pin: when that pin is already
    written (committed with the corpus, whose patches are derived again rather than committed: they
    carry rows cloned from the repository's seeds) its patch is stored and it is returned, built first if
    this home lacks its gold or state (:func:`rebuild_augmented`)."""
    from dbt_harvest.harvester.workspace import augmentation_path

    sha = hashlib.sha256(patch_text.encode()).hexdigest()
    pin_id = f"{base.id}+aug-{sha[:12]}"
    existing = pin_path(pin_id, pins_dir())
    if existing.is_file():
        pin = read_pin(existing)
        if not augmentation_path(sha).is_file():  # a committed pin: its patch is derived again, not committed
            atomic.write_text(augmentation_path(sha), patch_text)
        if not built_here(pin):
            pin = rebuild_augmented(pin, options)
        return pin
    gold_sha, tables = _build_augmentation(base, pin_id, patch_text, added_rows, options)
    atomic.write_text(augmentation_path(sha), patch_text)
    pin = replace(
        base,
        id=pin_id,
        gold_sha256=gold_sha,
        tables=tables,
        augmentation_sha256=sha,
        augments=base.id,
        recovers=tuple(sorted(set(recovers))),
    )
    write_pin(pin, pins_dir())
    return pin


def built_here(pin: Pin) -> bool:
    """Whether this ``HARVEST_HOME`` holds the pin's gold and built state (a fresh home holds neither)."""
    from dbt_harvest.core.errors import GoldError
    from dbt_harvest.harvester.gold import gold_path
    from dbt_harvest.harvester.state import load_state

    try:
        gold_path(pin.gold_sha256)
        load_state(pin.id)
    except GoldError:
        return False
    return True


def rebuild_augmented(pin: Pin, options: AugmentOptions = AugmentOptions()) -> Pin:
    """Build a committed augmented pin in this home: its base pin's tree + its stored seed patch, with the
    same health checks as when it was made, installed only if the gold comes out as the pin records (a
    rebuild of the corpus from its pins then mints the augmented pin's tasks again); the pin as it stands.

    A gold with the tables the pin records but not the name (a pin named by its file's bytes, which did
    not reproduce; or ``options.rename_gold``) is installed under its content name and the pin rewritten
    with that name only, as `harvest add --rebuild` renames a base pin's gold: its tasks minted again differ
    from the locked ones only in the gold name. AugmentRebuildError when the base is not built here or the
    tables differ."""
    from dbt_harvest.harvester.workspace import augmentation_text

    base_path = pin_path(pin.augments, pins_dir())
    if not base_path.is_file():
        raise AugmentRebuildError(f"{pin.id}: its base pin {pin.augments} is not in {pins_dir()}")
    base = read_pin(base_path)
    if not built_here(base):
        raise AugmentRebuildError(
            f"{pin.id}: its base pin {base.id} is not built in this home; run `harvest add {base.spec} --rebuild` first"
        )
    patch_text = augmentation_text(pin)
    gold_sha, _ = _build_augmentation(
        base, pin.id, patch_text, patch_rows(patch_text), options, expect=pin.gold_sha256, recorded=pin.tables
    )
    if gold_sha == pin.gold_sha256:
        return pin
    renamed = replace(pin, gold_sha256=gold_sha)
    write_pin(renamed, pins_dir())
    return renamed


def patch_rows(patch_text: str) -> int:
    """Rows a seed patch of :func:`render` adds: its added lines less the lines it rewrites (a last line
    that gains its newline shows as one removed and one added line)."""
    lines = patch_text.splitlines()
    added = sum(1 for line in lines if line.startswith("+") and not line.startswith("+++"))
    removed = sum(1 for line in lines if line.startswith("-") and not line.startswith("---"))
    return added - removed


def _build_augmentation(
    base: Pin,
    pin_id: str,
    patch_text: str,
    added_rows: int,
    options: AugmentOptions,
    expect: str = "",
    recorded: tuple[TableRecord, ...] = (),
) -> tuple[str, tuple[TableRecord, ...]]:
    """Build base + patch twice (sandboxed), check the project stays healthy, install gold and state under
    ``pin_id``; the gold's name and the tables. ``expect``: the gold name the build must give (a committed
    pin rebuilt), unless its tables are the ``recorded`` ones (then the gold is installed under its content
    name, see :func:`rebuild_augmented`), else nothing is installed."""
    from dbt_harvest.harvester.add import _tables
    from dbt_harvest.harvester.gold import gold_path, install_gold
    from dbt_harvest.harvester.state import install_state

    sha = hashlib.sha256(patch_text.encode()).hexdigest()
    run_dir = builds_dir() / "augment" / f"{sha[:12]}-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S%f')}"
    run_dir.mkdir(parents=True, exist_ok=True)
    source = _augmented_source(base, patch_text, run_dir)
    builds = _built_without_new_failures(base, source, run_dir, options)
    first, tables = builds.first, _tables(builds)
    assert first.gold_file is not None
    _check_outputs(base, gold_path(base.gold_sha256), first.gold_file, tables, added_rows)
    rename = _gold_renamed(pin_id, first.gold_file, tables, expect, recorded) or options.rename_gold
    gold_sha = install_gold(first.gold_file, previous="" if rename else expect)
    install_state(
        pin_id, first.workspace, base.project_dir, max_bytes=options.limits.workspace_bytes, db_file=base.db_file
    )
    shutil.rmtree(source.root, ignore_errors=True)
    return gold_sha, tables


def _augmented_source(base: Pin, patch_text: str, run_dir: Path) -> Source:
    """The base pin's tree with the seed patch applied, under ``run_dir``, as the builds read a source."""
    from dbt_harvest.harvester.add import Source
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.workspace import compat_patch_text, template

    root = run_dir / "source"
    shutil.copytree(template(base), root, symlinks=True, ignore=shutil.ignore_patterns(".harvest-template.json"))
    apply_patch(root, patch_text)
    project = discover(root, base.project_dir)
    # only root and project are read by the builds; the rest restates the base pin
    return Source(
        spec=None,  # type: ignore[arg-type]  # an augmentation has no spec of its own; the builds never read it
        commit=base.commit,
        ref=base.ref,
        tree=base.tree,
        root_commits=base.root_commits,
        root=root,
        project=project,
        packages=base.packages,
        skipped=base.skipped,
        compat_patch=compat_patch_text(base),
        compat_edits=base.compat_edits,
    )


def _built_without_new_failures(base: Pin, source: Source, run_dir: Path, options: AugmentOptions) -> GoldBuilds:
    """The two gold builds of the augmented source; AugmentRejected when they fail or a dbt test fails that
    passes on the base pin's own data."""
    from dbt_harvest.harvester.add import AddOptions, _gold_builds

    add_options = AddOptions(sandboxed=options.sandboxed, limits=options.limits)
    try:
        builds = _gold_builds(
            source,
            base.clock,
            add_options,
            run_dir,
            database=base.database,
            excluded=base.excluded_tests,
            find_baseline=False,
        )
    except HarvestError as exc:
        line = str(exc).splitlines()[0][:300]
        # dbt skips what depends on a failed test, and a build with skipped models did not build
        raise AugmentRejected("dbt_test_fails" if "dbt test failed" in line else "build_fails", line) from None
    first = builds.first
    if first.tests_failed:
        allowed = _base_failing_tests(base, run_dir, options)
        new = sorted(set(first.failed_tests) - allowed)
        if new:
            raise AugmentRejected("dbt_test_fails", f"{new[0]}" + (f" and {len(new) - 1} more" if len(new) > 1 else ""))
    return builds


def _gold_renamed(
    pin_id: str, gold_file: Path, tables: tuple[TableRecord, ...], expect: str, recorded: tuple[TableRecord, ...]
) -> bool:
    """Whether the gold built for a committed pin is installed under its content name: it is not the
    ``expect``ed gold but has the ``recorded`` tables (the same gold in other bytes). AugmentRebuildError
    when it is neither."""
    from dbt_harvest.harvester.gold import matches
    from dbt_harvest.harvester.gold_digest import content_digest

    if not expect or matches(gold_file, expect):
        return False
    if not recorded or tuple(tables) != tuple(recorded):
        got = content_digest(gold_file)
        raise AugmentRebuildError(
            f"{pin_id}: rebuilt from its base and seed patch, the gold is {got[:12]}, "
            f"not the {expect[:12]} the pin records, and its tables differ from the pin's; "
            "its tasks cannot be re-minted here"
        )
    return True  # the recorded tables in other bytes: the same gold, named by its content


def _base_failing_tests(base: Pin, run_dir: Path, options: AugmentOptions) -> set[str]:
    """dbt tests that fail on the base pin's own data (a fresh sandboxed build): those may keep failing."""
    from dbt_harvest.harvester.build import build_workspace
    from dbt_harvest.harvester.discovery import discover
    from dbt_harvest.harvester.workspace import fresh_workspace

    workspace = fresh_workspace(base, run_dir / "base")
    project = discover(workspace, base.project_dir)
    result = build_workspace(
        workspace,
        project.rel_dir,
        project.profile,
        project.schema,
        base.clock,
        sandboxed=options.sandboxed,
        limits=options.limits,
        log_path=run_dir / "base.log",
        exclude_tests=base.excluded_tests,
        db_file=base.db_file,
        toolchain=base.toolchain,
    )
    return set(result.failed_tests)


def _check_outputs(base: Pin, base_gold: Path, new_gold: Path, tables: Sequence, added_rows: int) -> None:
    """Every gradable base table stays gradable, and loses at most ``added_rows`` of its rows (compared on
    its stable columns, as multisets): the outputs differ only where the added rows reach."""
    after = {t.name: t for t in tables}
    files = [str(base_gold.resolve()), str(Path(new_gold).resolve())]
    con = connect_locked(":memory:", Lock(allowed_paths=tuple(files + [f + ".wal" for f in files])))
    try:
        con.execute(f"ATTACH '{base_gold}' AS a (READ_ONLY)")
        con.execute(f"ATTACH '{new_gold}' AS b (READ_ONLY)")
        for table in base.gradable_tables:
            twin = after.get(table.name)
            if twin is None or not twin.gradable:
                raise AugmentRejected("ungradable", f"{table.name} is no longer gradable on the augmented data")
            cols = ", ".join('"' + table.columns[i].name.replace('"', '""') + '"' for i in table.stable_positions)
            schema, _, name = table.name.partition(".")
            rel = f'"{schema}"."{name}"'
            lost = con.execute(
                f"SELECT count(*) FROM (SELECT {cols} FROM a.{rel} EXCEPT ALL SELECT {cols} FROM b.{rel})"
            ).fetchone()[0]
            if lost > added_rows:
                raise AugmentRejected(
                    "outputs_changed", f"{table.name}: {lost} gold rows changed for {added_rows} added seed rows"
                )
    finally:
        con.close()


class _Tally:
    """What ``recover`` accumulates over its pins, turned into its report at the end."""

    def __init__(self) -> None:
        self.families: dict[str, dict[str, int]] = {}
        self.no_proposal: dict[str, int] = {}
        self.augmentations: list[Augmentation] = []
        self.kept: list[str] = []
        self.reports: list[CandidateReport] = []

    def count_derivation(
        self, rejected: dict[str, dict[str, int]], why: dict[str, int], proposals: Sequence[Proposal]
    ) -> None:
        """Count one pin's rejected candidates per family, why some got no proposal, and the proposals."""
        for family, counts in rejected.items():
            for group, n in counts.items():
                self.families.setdefault(family, _row())[group] += n
        for reason, n in why.items():
            self.no_proposal[reason] = self.no_proposal.get(reason, 0) + n
        for p in proposals:
            self.families.setdefault(p.family, _row())["proposed"] += 1

    def count_reminted(self, reports: Sequence[CandidateReport]) -> None:
        """Count the re-mint's reports of an augmented pin: its kept tasks are recovered."""
        self.reports.extend(reports)
        for r in reports:
            if r.kept and r.task_id:
                self.kept.append(r.task_id)
                self.families.setdefault(r.family, _row())["recovered"] += 1

    def report(self, seconds: float) -> RecoverReport:
        """The report of everything counted."""
        return RecoverReport(
            self.families,
            self.no_proposal,
            tuple(self.augmentations),
            tuple(self.kept),
            seconds,
            tuple(self.reports),
        )


def recover(
    pins: Sequence[Pin],
    mint_options: MintOptions,
    target: MintTarget,
    options: AugmentOptions = AugmentOptions(),
    on_result: Callable[[ShardJob, list[CandidateReport]], None] | None = None,
) -> RecoverReport:
    """Augment and re-mint each pin's invisible candidates (module docstring); the report per family."""

    started = time.perf_counter()
    tally = _Tally()
    chosen = tuple(f for f in options.families if mint_options.families is None or f in mint_options.families)
    for base in pins:
        if base.augmentation_sha256:
            continue  # never augment an augmented pin
        proposals, rejected, why = proposals_for(base, chosen)
        tally.count_derivation(rejected, why, proposals)
        if proposals:
            _augment_base(base, proposals, tally, mint_options, target, options, on_result)
    return tally.report(time.perf_counter() - started)


def _groups_to_try(proposals: list[Proposal]) -> list[list[Proposal]]:
    """The proposals to augment a pin with, in the order tried: all of them; else without the rows aimed at
    wrong repairs (an orphan may break a relationships test); else a few proposals alone."""
    plain = [replace(p, extra=()) for p in proposals if not p.for_wrong_repair]
    return (
        [proposals]
        + ([plain] if plain and plain != proposals else [])
        + ([[p] for p in proposals[:SINGLE_TRIES]] if len(proposals) > 1 else [])
    )


def _augment_base(
    base: Pin,
    proposals: list[Proposal],
    tally: _Tally,
    mint_options: MintOptions,
    target: MintTarget,
    options: AugmentOptions,
    on_result: Callable[[ShardJob, list[CandidateReport]], None] | None,
) -> None:
    """Try the groups of proposals on ``base`` until one makes a healthy augmented pin, and re-mint the
    candidates it serves there; every augmentation tried is counted."""
    seeds = _seeds_of(base)
    model_of = _models_of(base.id)
    for group in _groups_to_try(proposals):
        t0 = time.perf_counter()
        patch, written = render(seeds, [row for p in group for row in p.rows])
        keys = tuple(p.key for p in group)
        recovers = [(model_of.get(k, ""), k) for k in keys]
        try:
            pin = augmented_pin(base, patch, len(written), options, recovers=recovers)
        except AugmentRejected as exc:
            tally.augmentations.append(
                Augmentation(
                    base.id,
                    keys,
                    len(written),
                    discarded=exc.reason,
                    detail=exc.detail,
                    seconds=time.perf_counter() - t0,
                )
            )
            continue
        for p in group:
            tally.families[p.family]["augmented"] += 1
        models = frozenset(m for m, _ in recovers)
        reports = mint(
            [pin],
            replace(mint_options, only_keys=frozenset(keys), only_models=models),
            _base_split(target, base.id, pin.id),
            on_result=on_result,
        )
        tally.count_reminted(reports)
        tally.augmentations.append(
            Augmentation(base.id, keys, len(written), pin=pin.id, seconds=time.perf_counter() - t0)
        )
        return  # the first healthy augmentation serves its proposals; singles only when the whole one failed


def _base_split(target: MintTarget, base_id: str, pin_id: str) -> MintTarget:
    """``target`` with the augmented pin ``pin_id`` minted into its base pin's split."""

    def split_of(pid: str) -> tuple[str, str] | None:
        return target.split_of(base_id if pid == pin_id else pid)

    return MintTarget(split_of=split_of, store=target.store)


def _row() -> dict[str, int]:
    return {"invisible": 0, "no_wrong_repair": 0, "proposed": 0, "augmented": 0, "recovered": 0}


def _seeds_of(pin: Pin) -> dict[str, SeedTable]:
    from dbt_harvest.harvester.state import load_state
    from dbt_harvest.harvester.workspace import template

    return read_seeds(template(pin), pin.project_dir, load_state(pin.id).manifest)


def _models_of(pin_id: str) -> dict[str, str]:
    """Candidate key -> model of the pin's mint reports (read once per base pin)."""
    from dbt_harvest.harvester.mint.pipeline import load_reports

    return {r["key"]: r["model"] for r in load_reports(pin_id) if r.get("key")}


__all__ = [
    "AugmentOptions",
    "AugmentRebuildError",
    "AugmentRejected",
    "Augmentation",
    "RecoverReport",
    "augmented_pin",
    "built_here",
    "patch_rows",
    "proposals_for",
    "read_seeds",
    "rebuild_augmented",
    "recover",
    "time_probe",
]
