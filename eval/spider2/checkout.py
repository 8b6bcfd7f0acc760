"""Reading a local Spider 2.0-DBT checkout: its instances, where each one's project, database and gold are.

A checkout is the benchmark's ``spider2-dbt`` folder (or the repository root holding it), after the user
unpacked the benchmark's DuckDB archives into it (its ``setup.py``), or a folder ``harvest export spider2``
wrote. What is read::

    examples/spider2-dbt.jsonl                       instance_id, instruction, type
    examples/<id>/                                   the project as shipped: dbt_project.yml, profiles.yml,
                                                     dbt_packages/, the DuckDB file its profile names
    evaluation_suite/gold/spider2_eval.jsonl         the official grading of each instance (duckdb_match)
    evaluation_suite/gold/<id>/<gold>.duckdb         the gold tables
    evaluation_suite/reference/<id>.patch            optional: the true repair (our exports write it; the
                                                     benchmark has none), what the oracle driver plays

Both JSONL files are read by the official reader's rules (``core.scorer.spider2``). Nothing is copied:
the checkout is only read. An instance that cannot be played (no database, no gold, a grading the
official check cannot run, a project we cannot find) is kept with its problems, so it is listed and, in
an audit, counts 0.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.core.pin import PackageRecord
from dbt_harvest.core.scorer.spec import GradingSpec
from dbt_harvest.core.scorer.spider2 import METADATA_NAME as EVAL_FILE
from dbt_harvest.eval.export.spider2 import EXAMPLES, GOLD_DIR, REFERENCE_DIR, TASKS_FILE
from dbt_harvest.harvester.task_tree import NOT_PROJECT


class Spider2CheckoutError(HarvestError):
    """A folder is not a Spider 2.0-DBT checkout (or its metadata cannot be read as the official reader does)."""


@dataclass(frozen=True)
class Spider2Instance:
    """One benchmark instance as found in the checkout; ``problems`` say why it cannot be played (none: it can)."""

    instance_id: str
    instruction: str
    grading: GradingSpec | None
    example: Path  # examples/<id>
    project_dir: str = "."  # the dbt project, relative to the example folder
    profile: str = ""
    schema: str = "main"
    database: str = ""  # the DuckDB file the profile names, relative to the example folder
    gold: Path | None = None
    reference: str = ""  # the true repair when the checkout carries one (our exports); "" for the benchmark
    problems: tuple[str, ...] = ()
    #: packages.yml declares packages that dbt_packages/ does not hold whole (the benchmark's harness runs
    #: `dbt deps` with a network; two examples ship git submodules as empty folders)
    needs_packages: bool = False
    #: what `harvest spider2 import` resolved for such an instance; vendored into each of its workspaces
    packages: tuple[PackageRecord, ...] = ()

    @property
    def playable(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {
            "instance_id": self.instance_id,
            "playable": self.playable,
            "problems": list(self.problems),
            "project_dir": self.project_dir,
            "database": self.database,
            "gold": str(self.gold) if self.gold else None,
            "has_reference": bool(self.reference),
            "needs_packages": self.needs_packages,
            "packages": [f"{p.name}@{p.version or p.commit[:12]}" for p in self.packages],
            "graded_tables": list(self.grading.condition_tabs) if self.grading else [],
        }


@dataclass(frozen=True)
class Checkout:
    """A read checkout: its folder, the metadata's digest, and every instance of the gold metadata."""

    folder: Path
    metadata_sha256: str
    instances: tuple[Spider2Instance, ...]

    def by_id(self) -> dict[str, Spider2Instance]:
        return {i.instance_id: i for i in self.instances}


# ------------------------------------------------------------------------------------------- pure parts


def duckdb_params(evaluation: Any) -> tuple[dict[str, Any] | None, str]:
    """The parameters of the entry that decides the official score (the LAST duckdb_match of a list), or
    (None, why) when the official check is not a duckdb_match we mirror."""
    entries = evaluation if isinstance(evaluation, list) else [evaluation]
    deciding = [e for e in entries if isinstance(e, dict) and e.get("func") in ("duckdb_match", "table_match")]
    if not deciding:
        return None, "its evaluation has no duckdb_match entry (evaluate.py scores it 0)"
    last = deciding[-1]
    if last.get("func") != "duckdb_match" or not isinstance(last.get("parameters"), dict):
        return None, f"its deciding check is {last.get('func')!r}, which this environment does not grade"
    return dict(last["parameters"]), ""


def profile_output(profiles: Any, profile: str) -> tuple[dict[str, Any] | None, str]:
    """The target output of ``profile`` in a parsed profiles.yml, or (None, why)."""
    entry = profiles.get(profile) if isinstance(profiles, dict) else None
    if not isinstance(entry, dict):
        return None, f"profiles.yml has no profile {profile!r}"
    outputs = entry.get("outputs")
    target = entry.get("target") or "dev"
    output = outputs.get(target) if isinstance(outputs, dict) else None
    if not isinstance(output, dict):
        return None, f"profile {profile!r} has no output {target!r}"
    if output.get("type") != "duckdb":
        return None, f"profile {profile!r} is not a DuckDB profile (type {output.get('type')!r})"
    return output, ""


def database_path(project_dir: str, path: Any) -> tuple[str, str]:
    """The DuckDB file a profile's ``path`` names, relative to the example folder, or ("", why)."""
    if not isinstance(path, str) or not path.endswith(".duckdb") or "{{" in path:
        return "", f"the profile's DuckDB path {path!r} is not a plain .duckdb file name"
    parts = [p for p in Path(path).parts if p not in (".", "")]
    if Path(path).is_absolute() or ".." in parts or not parts:
        return "", f"the profile's DuckDB path {path!r} leaves the project"
    base = [] if project_dir in ("", ".") else [project_dir]
    return "/".join([*base, *parts]), ""


# ----------------------------------------------------------------------------------------------- reading


def checkout_folder(root: Path) -> Path:
    """The ``spider2-dbt`` folder of ``root`` (``root`` itself, or its ``spider2-dbt`` sub-folder)."""
    root = Path(root)
    for folder in (root, root / "spider2-dbt"):
        if (folder / EXAMPLES / TASKS_FILE).is_file() and (folder / GOLD_DIR / EVAL_FILE).is_file():
            return folder
    raise Spider2CheckoutError(
        f"{root} is not a Spider 2.0-DBT checkout: no {EXAMPLES}/{TASKS_FILE} and {GOLD_DIR}/{EVAL_FILE} there "
        "or under spider2-dbt/; pass the benchmark's spider2-dbt folder (or a `harvest export spider2` folder)"
    )


def _jsonl(path: Path) -> dict[str, dict[str, Any]]:
    from dbt_harvest.core.scorer.spider2 import read_jsonl_text

    try:
        read = read_jsonl_text(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise Spider2CheckoutError(f"{path} cannot be read ({exc})") from None
    if read.stopped:
        raise Spider2CheckoutError(f"{path} {read.stopped}: the official reader stops there; fix or remove that line")
    out: dict[str, dict[str, Any]] = {}
    for number, record in enumerate(read.records, 1):
        if not isinstance(record, dict) or not isinstance(record.get("instance_id"), str):
            raise Spider2CheckoutError(f"{path}:{number}: a line without a string instance_id")
        out[record["instance_id"]] = record  # a later line wins, as in the official reader
    return out


def find_project(example: Path) -> tuple[str, str]:
    """The dbt project of an example (the shallowest folder with both dbt_project.yml and profiles.yml,
    outside packages and build output), relative to it, or ("", why)."""
    if (example / "dbt_project.yml").is_file() and (example / "profiles.yml").is_file():
        return ".", ""
    found = sorted(
        (
            p.parent
            for p in example.rglob("profiles.yml")
            if (p.parent / "dbt_project.yml").is_file()
            and not NOT_PROJECT & set(p.relative_to(example).parts)
            and not p.is_symlink()
        ),
        key=lambda p: (len(p.parts), str(p)),
    )
    if not found:
        return "", "no folder of the example holds both dbt_project.yml and profiles.yml"
    if len(found) > 1 and len(found[0].parts) == len(found[1].parts):
        return "", f"two dbt projects at the same depth ({found[0].name}, {found[1].name})"
    return found[0].relative_to(example).as_posix(), ""


def packages_missing(project: Path) -> bool:
    """Whether the project's declared packages are not all installed (dbt's own check: as many package
    folders with a dbt_project.yml as declared packages, and no folder without one)."""
    from dbt_harvest.harvester.packages.specs import read_declared

    try:
        declared = read_declared(project).specs
    except HarvestError:
        return True
    if not declared:
        return False
    folder = project / "dbt_packages"
    installed = [p for p in folder.iterdir() if p.is_dir() and not p.is_symlink()] if folder.is_dir() else []
    whole = [p for p in installed if (p / "dbt_project.yml").is_file()]
    return len(whole) < len(declared) or len(whole) < len(installed)


def _read_yaml(path: Path) -> Any:
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        return HarvestError(f"{path.name} cannot be read ({' '.join(str(exc).split())[:200]})")


def _project_facts(example: Path) -> tuple[dict[str, Any], list[str]]:
    """project_dir, profile, schema and database of an example, with the problems found."""
    from dbt_harvest.harvester.sandbox import safe_fs

    problems: list[str] = []
    if not example.is_dir() or example.is_symlink():
        return {}, [f"no example folder {EXAMPLES}/{example.name}"]
    project_dir, why = find_project(example)
    if why:
        return {}, [why]
    project = example / project_dir
    config, profiles = _read_yaml(project / "dbt_project.yml"), _read_yaml(project / "profiles.yml")
    for doc in (config, profiles):
        if isinstance(doc, Exception):
            return {"project_dir": project_dir}, [str(doc)]
    profile = str(config.get("profile") or "") if isinstance(config, dict) else ""
    output, why = profile_output(profiles, profile)
    if output is None:
        return {"project_dir": project_dir, "profile": profile}, [why]
    database, why = database_path(project_dir, output.get("path"))
    facts = {
        "project_dir": project_dir,
        "profile": profile,
        "schema": str(output.get("schema") or "main"),
        "database": database,
        "needs_packages": packages_missing(project),
    }
    if why:
        problems.append(why)
    elif not safe_fs.is_file(example, database):  # a regular file reached without a link
        problems.append(
            f"no database {EXAMPLES}/{example.name}/{database} (unpack the benchmark's DuckDB archive: its setup.py)"
        )
    return facts, problems


def _grading(
    iid: str, record: dict[str, Any] | None, gold_dir: Path, alias: str | None
) -> tuple[GradingSpec | None, Path | None, list[str]]:
    from dbt_harvest.core.scorer.spider2 import resolve_call, show_tables

    if record is None:
        return None, None, [f"no line in {EVAL_FILE}"]
    params, why = duckdb_params(record.get("evaluation"))
    if params is None:
        return None, None, [why]
    name = alias or str(params.get("gold") or "")
    if "/" in name or "\\" in name or name in (".", ".."):
        return None, None, [f"its gold file name {name!r} is not a plain file name"]
    path = gold_dir / iid / name
    gold: Path | None = path
    problems: list[str] = []
    if not name or not path.is_file() or path.is_symlink():
        others = sorted(p.name for p in (gold_dir / iid).glob("*.duckdb")) if (gold_dir / iid).is_dir() else []
        hint = f"; the folder holds {', '.join(others)} (--gold-alias {iid}=FILE uses one)" if others else ""
        problems.append(f"no gold database {GOLD_DIR}/{iid}/{name}{hint}")
        gold = None

    def gold_tables() -> list[str]:
        if gold is None:
            raise HarvestError("its condition_tabs are absent and there is no gold to list the tables of")
        return show_tables(gold)

    try:
        call = resolve_call(params, gold_tables)
    except HarvestError as exc:
        return None, gold, [*problems, f"its grading cannot be read ({exc})"]
    if call.spec is None:
        return None, gold, [*problems, f"its grading cannot be played: {call.reason}"]
    return call.spec, gold, problems


def _packages(needs: bool, recorded: tuple[PackageRecord, ...] | str) -> tuple[tuple[PackageRecord, ...], list[str]]:
    """The packages to vendor for an instance (``needs``: its project uses packages it does not ship) from
    what `harvest spider2 import` recorded (the packages, or why they could not be resolved), and the
    instance's problem when it needs packages and has none."""
    if not needs:
        return (), []
    if isinstance(recorded, str):
        return (), [f"its packages are not installed in dbt_packages/ and could not be resolved ({recorded})"]
    if not recorded:
        return (), [
            "its packages are not installed in dbt_packages/: `harvest spider2 import` resolves them "
            "(from the dbt hub, or --package-mirror DIR offline)"
        ]
    return tuple(recorded), []


def read_checkout(
    root: Path,
    aliases: dict[str, str] | None = None,
    packages: dict[str, tuple[PackageRecord, ...] | str] | None = None,
) -> Checkout:
    """Every instance of the checkout's gold metadata, located, with its problems (see the module docstring).

    ``aliases``: instance id -> the gold file to use when the benchmark ships it under another name than its
    metadata says (evaluate.py scores such an instance 0; the alias is the user's explicit choice).
    ``packages``: instance id -> the packages `harvest spider2 import` resolved for an instance whose
    packages are not installed (or why they could not be); such an instance without them cannot be played."""
    folder = checkout_folder(root).resolve()
    tasks_path, eval_path = folder / EXAMPLES / TASKS_FILE, folder / GOLD_DIR / EVAL_FILE
    tasks, evals = _jsonl(tasks_path), _jsonl(eval_path)
    aliases = dict(aliases or {})
    unknown = sorted(set(aliases) - set(evals))
    if unknown:
        raise Spider2CheckoutError(f"--gold-alias names {', '.join(unknown)}, not an instance of {eval_path}")
    digest = hashlib.sha256(tasks_path.read_bytes() + b"\0" + eval_path.read_bytes()).hexdigest()
    instances = []
    for iid in sorted(set(evals) | set(tasks)):
        problems: list[str] = []
        if "/" in iid or iid.startswith(".") or not iid:
            raise Spider2CheckoutError(f"instance id {iid!r} cannot name a folder")
        task = tasks.get(iid)
        instruction = str(task.get("instruction") or "") if task else ""
        if not instruction:
            problems.append(f"no instruction in {EXAMPLES}/{TASKS_FILE}")
        example = folder / EXAMPLES / iid
        facts, found = _project_facts(example)
        problems += found
        grading, gold, found = _grading(iid, evals.get(iid), folder / GOLD_DIR, aliases.get(iid))
        problems += found
        needs = bool(facts.get("needs_packages"))
        resolved, found = _packages(needs, (packages or {}).get(iid, ()))
        problems += found
        patch = folder / REFERENCE_DIR / f"{iid}.patch"
        reference = patch.read_text(encoding="utf-8") if patch.is_file() and not patch.is_symlink() else ""
        instances.append(
            Spider2Instance(
                instance_id=iid,
                instruction=instruction,
                grading=grading,
                example=example,
                project_dir=facts.get("project_dir", "."),
                profile=facts.get("profile", ""),
                schema=facts.get("schema", "main"),
                database=facts.get("database", ""),
                gold=gold,
                reference=reference,
                problems=tuple(problems),
                needs_packages=needs,
                packages=resolved,
            )
        )
    return Checkout(folder, digest, tuple(instances))
