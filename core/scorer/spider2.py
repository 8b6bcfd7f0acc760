"""Scoring a Spider 2.0-DBT submission folder against the official metadata, honestly aggregated.

Layout read (Spider 2.0-DBT's evaluation suite): ``<gold>/spider2_eval.jsonl`` (one instance per line,
``evaluation.func == "duckdb_match"``, parameters = a GradingSpec) and ``<gold>/<instance_id>/<gold file>``.
The submission: ``<results>/<instance_id>/<gold file name>``, or, when ``<results>/results_metadata.jsonl``
exists, the path its line for the instance names (``answer_or_path``, a file or a folder holding the
gold file name; relative paths are relative to ``<results>``).

Unlike the official driver, the score is k/N over ALL instances of the metadata (a missing submission
counts 0), reported beside k/M over the M instances whose gold can be read, and every 0 has a reason.
Gold normalization fails closed: a gold file shipped under another name is used only when the caller
names it (``aliases``: instance id -> file name in that instance's gold folder); the result records both
names and the file's sha256, and the file is never renamed or edited.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from core.scorer.errors import GoldTableError
from core.scorer.spec import GradingSpec, SpecFormatError
from core.scorer.verdict import Score
from core.atomic import sha256_file
from core.errors import HarvestError

METADATA_NAME = "spider2_eval.jsonl"
RESULTS_METADATA_NAME = "results_metadata.jsonl"


class Spider2LayoutError(HarvestError):
    """The gold or results folder does not have the Spider 2.0-DBT layout, or an alias is invalid."""


@dataclass(frozen=True)
class Spider2Instance:
    instance_id: str
    spec: GradingSpec


@dataclass(frozen=True)
class GoldAlias:
    """A gold file used under a name other than the metadata's (recorded, never renamed)."""

    instance_id: str
    expected_name: str
    shipped_name: str
    sha256: str


@dataclass(frozen=True)
class InstanceResult:
    instance_id: str
    official: int
    strict: int
    reason: str
    scoreable: bool
    gold_alias: GoldAlias | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "instance_id": self.instance_id,
            "official": self.official,
            "strict": self.strict,
            "reason": self.reason,
            "scoreable": self.scoreable,
        }
        if self.gold_alias is not None:
            out["gold_alias"] = {
                "expected_name": self.gold_alias.expected_name,
                "shipped_name": self.gold_alias.shipped_name,
                "sha256": self.gold_alias.sha256,
            }
        return out


@dataclass(frozen=True)
class Spider2Report:
    instances: tuple[InstanceResult, ...]

    @property
    def total(self) -> int:
        return len(self.instances)

    @property
    def score(self) -> int:
        return sum(r.official for r in self.instances)

    @property
    def strict_score(self) -> int:
        return sum(r.strict for r in self.instances)

    @property
    def scoreable(self) -> int:
        return sum(1 for r in self.instances if r.scoreable)

    def to_dict(self) -> dict[str, Any]:
        return {
            "instances": [r.to_dict() for r in self.instances],
            "score": self.score,
            "strict_score": self.strict_score,
            "total": self.total,
            "scoreable": self.scoreable,
            "scoreable_score": sum(r.official for r in self.instances if r.scoreable),
        }


def read_metadata(path: Path) -> list[Spider2Instance]:
    """The duckdb_match instances of a Spider 2.0-DBT metadata file, in file order."""
    if not path.is_file():
        raise Spider2LayoutError(f"metadata {path} not found: pass the gold folder holding {METADATA_NAME}")
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            evaluation = obj["evaluation"]
            if evaluation.get("func") != "duckdb_match":
                raise Spider2LayoutError(f"{path}:{n}: evaluation func {evaluation.get('func')!r} is not duckdb_match")
            out.append(Spider2Instance(str(obj["instance_id"]), GradingSpec.from_dict(evaluation["parameters"])))
        except (json.JSONDecodeError, KeyError, TypeError, SpecFormatError) as exc:
            raise Spider2LayoutError(f"{path}:{n}: malformed metadata line: {exc}") from None
    return out


def results_index(results: Path) -> dict[str, Path]:
    meta = results / RESULTS_METADATA_NAME
    index: dict[str, Path] = {}
    if not meta.is_file():
        return index
    for n, line in enumerate(meta.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            target = obj.get("answer_or_path") or obj.get("path") or obj.get("answer")
            if target:
                path = Path(str(target))
                index[str(obj["instance_id"])] = path if path.is_absolute() else results / path
        except (json.JSONDecodeError, KeyError, TypeError) as exc:
            raise Spider2LayoutError(f"{meta}:{n}: malformed results line: {exc}") from None
    return index


def _prediction_path(results: Path, index: dict[str, Path], inst: Spider2Instance) -> Path:
    name = Path(inst.spec.gold).name
    target = index.get(inst.instance_id)
    if target is None:
        return results / inst.instance_id / name
    return target / name if target.is_dir() else target


def _gold_path(gold: Path, inst: Spider2Instance, aliases: dict[str, str]) -> tuple[Path, GoldAlias | None]:
    folder = gold / inst.instance_id
    expected = Path(inst.spec.gold).name
    shipped = aliases.get(inst.instance_id)
    if shipped is None:
        return folder / expected, None
    path = folder / shipped
    if not path.is_file():
        raise Spider2LayoutError(f"gold alias {inst.instance_id}={shipped}: {path} does not exist")
    return path, GoldAlias(inst.instance_id, expected, shipped, sha256_file(path))


def validate_aliases(aliases: dict[str, str], instances: list[Spider2Instance]) -> None:
    known = {i.instance_id for i in instances}
    for iid, name in aliases.items():
        if iid not in known:
            raise Spider2LayoutError(f"gold alias names unknown instance {iid!r}")
        if not name or "/" in name or "\\" in name or name in {".", ".."}:
            raise Spider2LayoutError(f"gold alias {iid}={name!r} must be a plain file name in the gold folder")


def score_instance(gold: Path, results: Path, index: dict[str, Path], inst: Spider2Instance,
                   aliases: dict[str, str]) -> InstanceResult:
    from core.scorer import score

    gold_file, alias = _gold_path(gold, inst, aliases)
    if not gold_file.is_file():
        others = sorted(p.name for p in gold_file.parent.glob("*.duckdb")) if gold_file.parent.is_dir() else []
        hint = f"; found {', '.join(others)}: pass --gold-alias {inst.instance_id}=<file> to use one" if others else ""
        return InstanceResult(inst.instance_id, 0, 0, f"unscoreable: gold file {gold_file.name} missing{hint}", False)
    pred = _prediction_path(results, index, inst)
    try:
        result: Score = score(gold_file, pred, inst.spec)
    except GoldTableError as exc:
        return InstanceResult(inst.instance_id, 0, 0, f"unscoreable: {exc}", False, alias)
    reason = result.official.reason or result.strict.reason
    return InstanceResult(
        inst.instance_id, result.official.score, result.strict.score, reason, True, alias
    )


def score_folder(results: Path, gold: Path, aliases: dict[str, str] | None = None) -> Spider2Report:
    """Score every instance of ``<gold>/spider2_eval.jsonl`` against the submission folder ``results``."""
    aliases = dict(aliases or {})
    instances = read_metadata(gold / METADATA_NAME)
    validate_aliases(aliases, instances)
    if not results.is_dir():
        raise Spider2LayoutError(f"results folder {results} does not exist")
    index = results_index(results)
    return Spider2Report(tuple(score_instance(gold, results, index, i, aliases) for i in instances))
