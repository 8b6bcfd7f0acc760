"""`harvest experiment RECIPE.toml`: base vs trained on the sealed split, as one resumable command.

The question the corpus exists to answer is whether training on it moves a model's score on tasks it never
saw. Every piece exists on its own (audit, train sft|grpo, gate, freeze, the sealed audit, audit compare);
this module runs them in the one order that keeps the answer honest and records each finished step in
``EXPERIMENT/experiment.json``, so a killed experiment continues from its last finished step:

1. ``dev-base``     audit the untrained base model on dev (a report, never a selection signal);
   ``power``        the sealed split's minimum detectable effect (``eval.audit.power``: exact McNemar, 80%
   power, the dev-base pass rate); above 10 points the experiment stops here, before any training or
   unsealing, unless ``--allow-underpowered`` is given, and then its report says the result is underpowered;
2. ``gate-sft``     one optimizer step of the SFT run: peak memory and projected time, before committing;
3. ``sft``          the SFT run (resumes from its own checkpoints);
4. ``gate-grpo``, ``grpo`` (optional) GRPO continuing the SFT adapter (``[model] init_adapter``);
5. ``dev-trained``  audit the trained adapter on dev (a report);
6. ``freeze``       freeze the final run: the recipe;
7. ``sealed-trained`` and ``sealed-base``: the sealed test split audited ONCE for each arm of the recipe
   (``corpora.sealed.ARMS``: the recipe's adapter, and its untrained base as the control of the same
   frozen protocol), each recorded in the committed results ledger;
8. ``spider2-trained`` and ``spider2-base`` (only when the recipe names a Spider 2.0-DBT checkout,
   ``[audit] spider2``): the benchmark's sealed part audited ONCE for each arm under its own once-only
   ledger (``eval.spider2.sealed``); an instance that cannot be played counts 0 and is named, never
   skipped; each graded database is kept in Spider2's results layout, from which the line the official
   ``evaluate.py`` would print is computed (``core.scorer.spider2``);
9. ``compare``      base vs trained, task by task, on the sealed split (paired: exact McNemar and a
   bootstrap interval of the difference), on Spider2's sealed part when audited, and on dev;
10. ``report``      ``report.md``, ``report.json`` and ``report.png`` in the experiment folder.

The recipe names the training configs (``[train] sft``, optional ``grpo``) and the audit settings; the
experiment writes its runs under its own folder (``[experiment] output_dir/name``), so two experiments
never share a run. A recipe that changed since its experiment started is refused (start a new name).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dbt_harvest.core import atomic
from dbt_harvest.train.errors import TrainConfigError, TrainError

STATE_NAME = "experiment.json"
STEPS = (
    "dev-base",
    "power",
    "gate-sft",
    "sft",
    "gate-grpo",
    "grpo",
    "dev-trained",
    "freeze",
    "sealed-trained",
    "sealed-base",
    "spider2-trained",
    "spider2-base",
    "compare",
    "report",
)
#: the steps only a recipe naming a Spider 2.0-DBT checkout (``[audit] spider2``) plans
SPIDER2_STEPS = ("spider2-trained", "spider2-base")


class ExperimentError(TrainError):
    """An experiment cannot start or continue: a bad recipe, a changed recipe, a step that cannot finish."""


@dataclass(frozen=True)
class AuditSettings:
    driver: str = "hf"
    workers: int = 1
    max_turns: int = 30
    repeat_limit: int = 3
    max_new_tokens: int = 512


@dataclass(frozen=True)
class Recipe:
    name: str
    output_dir: Path
    claim: str
    sft: Path
    grpo: Path | None
    gate: bool
    dev: bool
    audit: AuditSettings
    source: Path
    sha256: str
    spider2: Path | None = None  # the Spider 2.0-DBT checkout whose sealed part both arms are audited on

    @property
    def folder(self) -> Path:
        return self.output_dir / self.name


_KNOWN = {
    "experiment": {"name", "output_dir", "claim", "gate", "dev"},
    "train": {"sft", "grpo"},
    "audit": {f.name for f in dataclasses.fields(AuditSettings)} | {"spider2"},
}


def _spider2_checkout(path: Path, value: Any) -> Path:
    """The Spider 2.0-DBT checkout ``[audit] spider2`` names (relative to the recipe file), checked now: an
    experiment must not train for hours before finding that its Spider2 leg cannot run. It must be a
    checkout (``eval.spider2.checkout``) of the benchmark itself: an export of our own tasks has no sealed part."""
    from dbt_harvest.eval.spider2.checkout import Spider2CheckoutError, read_checkout
    from dbt_harvest.eval.spider2.split import committed

    folder = path.parent / str(value)
    if not str(value).strip() or not folder.is_dir():
        raise TrainConfigError(f"{path}: [audit] spider2 = {str(value)!r}: no folder at {folder}")
    try:
        checkout = read_checkout(folder)
    except Spider2CheckoutError as exc:
        raise TrainConfigError(f"{path}: [audit] spider2: {exc}") from None
    if not committed().is_benchmark(set(checkout.by_id())):
        raise TrainConfigError(
            f"{path}: [audit] spider2: {checkout.folder} holds none of Spider 2.0-DBT's instances (an export "
            "of our own tasks has no sealed part); name the benchmark's spider2-dbt folder"
        )
    return checkout.folder  # the spider2-dbt folder itself, resolved


def load_recipe(path: Path) -> Recipe:
    """Read and check an experiment recipe. The run configs it names are relative to the recipe file;
    ``output_dir`` is relative to the working folder, as a run config's is."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
        raw = tomllib.loads(text)
    except FileNotFoundError:
        raise TrainConfigError(f"no experiment recipe at {path}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise TrainConfigError(f"{path}: not valid TOML ({exc})") from None
    for section, values in raw.items():
        if section not in _KNOWN or not isinstance(values, dict):
            raise TrainConfigError(f"{path}: unknown section [{section}]; known: {', '.join(_KNOWN)}")
        unknown = sorted(set(values) - _KNOWN[section])
        if unknown:
            raise TrainConfigError(f"{path}: unknown key(s) {', '.join(unknown)} in [{section}]")
    exp, train, audit = raw.get("experiment", {}), raw.get("train", {}), raw.get("audit", {})
    name = str(exp.get("name", ""))
    if not name or "/" in name or name.startswith("."):
        raise TrainConfigError(f"{path}: [experiment] name must be a plain folder name")
    if not str(exp.get("claim", "")).strip():
        raise TrainConfigError(f"{path}: [experiment] claim must say what the experiment is meant to show")
    if not train.get("sft"):
        raise TrainConfigError(f"{path}: [train] sft must name the SFT run config")
    here = path.parent
    spider2 = _spider2_checkout(path, audit["spider2"]) if "spider2" in audit else None
    try:
        settings = AuditSettings(**{k: v for k, v in audit.items() if k != "spider2"})
    except TypeError as exc:
        raise TrainConfigError(f"{path}: [audit] {exc}") from None
    if settings.driver != "hf":
        raise TrainConfigError(
            f"{path}: [audit] driver = {settings.driver!r}; the experiment plays the recipe's own "
            "model with the hf driver (an endpoint cannot prove it serves the frozen adapter)"
        )
    if min(settings.workers, settings.max_turns, settings.max_new_tokens) < 1 or settings.repeat_limit < 2:
        raise TrainConfigError(f"{path}: [audit] workers, max_turns and max_new_tokens must be >= 1, repeat_limit >= 2")
    grpo = train.get("grpo") or None
    return Recipe(
        name=name,
        output_dir=Path(str(exp.get("output_dir", "runs"))),
        claim=str(exp["claim"]).strip(),
        sft=here / str(train["sft"]),
        grpo=here / str(grpo) if grpo else None,
        gate=bool(exp.get("gate", True)),
        dev=bool(exp.get("dev", True)),
        audit=settings,
        source=path,
        sha256=hashlib.sha256(text.encode()).hexdigest(),
        spider2=spider2,
    )


def _config(path: Path, recipe: Recipe, **model: str) -> Any:
    """A run config of the recipe, its runs written under the experiment folder (and its model overridden)."""
    from dbt_harvest.train.configs import config_from_dict

    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrainConfigError(f"{recipe.source}: no run config at {path}") from None
    except tomllib.TOMLDecodeError as exc:
        raise TrainConfigError(f"{path}: not valid TOML ({exc})") from None
    raw.setdefault("run", {})["output_dir"] = str(recipe.folder / "runs")
    if model:
        raw["model"] = {**raw.get("model", {}), **model}
    return config_from_dict(raw, where=str(path))


class Experiment:
    """One experiment folder: its recipe, its state, and the steps still to run."""

    def __init__(
        self,
        recipe: Recipe,
        say: Callable[[str], None] = lambda _: None,
        progress: Callable[..., Any] | None = None,
        allow_underpowered: bool = False,
    ) -> None:
        self.recipe, self.say, self.progress = recipe, say, progress
        self.allow_underpowered = allow_underpowered
        self.folder = recipe.folder
        self.state = self._load_state()

    # -- state ---------------------------------------------------------------------------------------
    def _load_state(self) -> dict[str, Any]:
        path = self.folder / STATE_NAME
        if not path.exists():
            return {"recipe": str(self.recipe.source), "recipe_sha256": self.recipe.sha256, "steps": {}}
        try:
            state = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise ExperimentError(
                f"{path}: unreadable experiment state ({exc}); it is written atomically, so restore it "
                "or start a new experiment name"
            ) from None
        if state.get("recipe_sha256") != self.recipe.sha256:
            raise ExperimentError(
                f"{self.recipe.source} changed since experiment {self.recipe.name!r} started; a running "
                "experiment's recipe is fixed: give the changed recipe a new [experiment] name"
            )
        return state

    def _done(self, step: str, result: dict[str, Any], seconds: float) -> None:
        self.state["steps"][step] = {"result": result, "seconds": round(seconds, 1)}
        self.folder.mkdir(parents=True, exist_ok=True)
        atomic.write_text(self.folder / STATE_NAME, json.dumps(self.state, sort_keys=True, indent=1) + "\n")

    def result(self, step: str) -> dict[str, Any]:
        return self.state["steps"][step]["result"]

    def planned(self) -> list[str]:
        skip = set()
        if self.recipe.grpo is None:
            skip |= {"gate-grpo", "grpo"}
        if not self.recipe.gate:
            skip |= {"gate-sft", "gate-grpo"}
        if not self.recipe.dev:
            skip |= {"dev-base", "dev-trained"}
        if self.recipe.spider2 is None:
            skip |= set(SPIDER2_STEPS)
        return [s for s in STEPS if s not in skip]

    # -- running ---------------------------------------------------------------------------------------
    def run(self) -> dict[str, Any]:
        for step in self.planned():
            if step in self.state["steps"]:
                self.say(f"{step}: done before, kept")
                continue
            self.say(f"{step}: running")
            started = time.perf_counter()
            result = getattr(self, "_" + step.replace("-", "_"))()
            self._done(step, result, time.perf_counter() - started)
        return self.result("report")

    def _audit(self, split: str, run_name: str, **request: Any) -> dict[str, Any]:
        """Audit ``split`` into ``audits/<run_name>`` with the recipe's settings; -> the step's summary."""
        return _summary(self.folder / "audits" / run_name, self._audit_report(split, run_name, **request))

    def _audit_report(self, split: str, run_name: str, **request: Any) -> dict[str, Any]:
        """Audit ``split`` into ``audits/<run_name>`` with the recipe's settings; -> the audit's report."""
        from dbt_harvest.eval.audit.session import AuditRequest, run_split

        a = self.recipe.audit
        req = AuditRequest(
            split=split,
            driver=a.driver,
            run_dir=self.folder / "audits" / run_name,
            workers=a.workers,
            max_turns=a.max_turns,
            repeat_limit=a.repeat_limit,
            max_new_tokens=a.max_new_tokens,
            **request,
        )
        kwargs: dict[str, Any] = {"say": self.say}
        if self.progress is not None:
            kwargs["progress"] = self.progress
        return run_split(req, **kwargs)

    def _base_model(self) -> tuple[str, str | None]:
        from dbt_harvest.train.base_model import resolve_base

        path, revision = resolve_base(_config(self.recipe.sft, self.recipe))
        return path, (None if revision == "local" else revision)

    def _dev_base(self) -> dict[str, Any]:
        model, revision = self._base_model()
        return self._audit("dev", "dev-base", model=model, revision=revision)

    def _power(self) -> dict[str, Any]:
        """The sealed split's minimum detectable effect, from its sealed count and the dev-base pass rate;
        refused above :data:`~dbt_harvest.eval.audit.power.MAX_MDE` unless the experiment allows it."""
        from dbt_harvest.core.home import pins_dir
        from dbt_harvest.corpora.sealed import read_seal
        from dbt_harvest.eval.audit.power import analyse

        seal = read_seal(pins_dir())
        dev = self.state["steps"].get("dev-base")
        rate = dev["result"]["official"] / dev["result"]["n"] if dev and dev["result"]["n"] else None
        analysis = analyse(seal.count if seal else 0, rate)
        self.say(analysis.summary())
        unsealed = any(step in self.state["steps"] for step in ("sealed-trained", "sealed-base"))
        if analysis.underpowered and not self.allow_underpowered and not unsealed:
            raise ExperimentError(
                f"the sealed split is underpowered: {analysis.summary()}. Each arm audits it once, so the "
                "audits would spend it on a result that cannot show a realistic gain; grow the test split, or "
                "run again with --allow-underpowered (the report then says the result is underpowered)"
            )
        return {**analysis.to_dict(), "allowed_underpowered": analysis.underpowered}

    def _gate(self, config: Any, kind: str) -> dict[str, Any]:
        from dbt_harvest.train.grpo import run_grpo
        from dbt_harvest.train.sft import run_sft

        report = run_sft(config, gate=True) if kind == "sft" else run_grpo(config, gate=True)
        for line in report.lines():
            self.say(line)
        return report.to_dict()

    def _gate_sft(self) -> dict[str, Any]:
        return self._gate(_config(self.recipe.sft, self.recipe), "sft")

    def _sft(self) -> dict[str, Any]:
        from dbt_harvest.train.sft import run_sft

        config = _config(self.recipe.sft, self.recipe)
        if (config.run_dir / "manifest.json").is_file():  # finished before the state was written
            return {"run_dir": str(config.run_dir)}
        result = run_sft(config)
        return {
            "run_dir": str(result.run_dir),
            "rows": result.manifest.get("rows"),
            "rows_left_out": len(result.manifest.get("rows_left_out") or []),
        }

    def _grpo_config(self) -> Any:
        """The GRPO run continues the SFT adapter on the SFT run's own base model."""
        sft_dir = Path(self.result("sft")["run_dir"])
        sft = _config(self.recipe.sft, self.recipe)
        assert self.recipe.grpo is not None
        base = str(sft_dir / "base-tiny") if sft.is_tiny else sft.model.base
        return _config(
            self.recipe.grpo,
            self.recipe,
            base=base,
            revision=sft.model.revision,
            dtype=sft.model.dtype,
            init_adapter=str(sft_dir / "adapter"),
        )

    def _gate_grpo(self) -> dict[str, Any]:
        return self._gate(self._grpo_config(), "grpo")

    def _grpo(self) -> dict[str, Any]:
        from dbt_harvest.train.grpo import run_grpo

        config = self._grpo_config()
        if (config.run_dir / "manifest.json").is_file():
            return {"run_dir": str(config.run_dir)}
        result = run_grpo(config)
        return {"run_dir": str(result.run_dir)}

    def _final_run(self) -> Path:
        return Path(self.result("grpo" if "grpo" in self.planned() else "sft")["run_dir"])

    def _dev_trained(self) -> dict[str, Any]:
        from dbt_harvest.corpora.recipe import ADAPTER_DIR, inspect_run

        run_dir = self._final_run()
        facts = inspect_run(run_dir)  # the same verified model and adapter the recipe will freeze
        model, revision = _run_base(run_dir, facts.manifest["base_model"])
        return self._audit("dev", "dev-trained", model=model, adapter=str(run_dir / ADAPTER_DIR), revision=revision)

    def _freeze(self) -> dict[str, Any]:
        from dbt_harvest.corpora.recipe import FROZEN_NAME, freeze, verify_frozen

        run_dir = self._final_run()
        frozen = verify_frozen(run_dir) if (run_dir / FROZEN_NAME).exists() else freeze(run_dir)
        return {"run_dir": str(run_dir), "recipe": frozen.recipe, "adapter_sha256": frozen.adapter_sha256}

    def _sealed(self, arm: str) -> dict[str, Any]:
        from dbt_harvest.core.home import pins_dir
        from dbt_harvest.eval.audit.report import write_report
        from dbt_harvest.eval.audit.rundir import RunDir
        from dbt_harvest.eval.audit.sealed import audited

        frozen = self.result("freeze")
        name = f"sealed-{'trained' if arm == 'recipe' else 'base'}"
        run_dir = self.folder / "audits" / name
        recorded = audited(pins_dir(), frozen["recipe"], arm)
        if recorded is not None:  # the audit finished and was recorded; only this state file missed it
            report = write_report(RunDir(run_dir)) if (run_dir / "run.json").exists() else None
            if report is None or report["official"] != recorded["official"]:
                raise ExperimentError(
                    f"the {arm} arm of recipe {frozen['recipe']} was audited outside this experiment "
                    f"({recorded['time']}); its sealed result cannot be claimed here"
                )
            return _summary(run_dir, report)
        return self._audit("test", name, recipe=Path(frozen["run_dir"]), arm=arm)

    def _sealed_trained(self) -> dict[str, Any]:
        return self._sealed("recipe")

    def _sealed_base(self) -> dict[str, Any]:
        return self._sealed("base")

    def _spider2(self, arm: str) -> dict[str, Any]:
        """One arm's once-only audit of Spider2's sealed part: every instance of it, one that cannot be played
        counted 0 and named. An audit the ledger already holds for this recipe and arm is claimed only when
        this experiment's run folder is that audit (its recorded start and k/N), as ``_sealed`` does."""
        from dbt_harvest.core.home import pins_dir
        from dbt_harvest.eval.audit.report import write_report
        from dbt_harvest.eval.audit.rundir import RunDir

        assert self.recipe.spider2 is not None
        frozen = self.result("freeze")
        name = f"spider2-{'trained' if arm == 'recipe' else 'base'}"
        run_dir, results = self.folder / "audits" / name, self.folder / "audits" / f"{name}-results"
        recorded = spider2_audited(pins_dir(), frozen["recipe"], arm)
        if recorded is not None:  # the audit finished and was recorded; only this state file missed it
            report = write_report(RunDir(run_dir)) if (run_dir / "run.json").exists() else None
            start = (report or {}).get("sealed") or {}
            if (
                report is None
                or start.get("commitment") != recorded["start"]
                or report["official"] != recorded["official"]
            ):
                raise ExperimentError(
                    f"the {arm} arm of recipe {frozen['recipe']} had its sealed Spider2 audit outside this "
                    f"experiment ({recorded['time']}); its result cannot be claimed here"
                )
        else:
            report = self._audit_report(
                "sealed",
                name,
                recipe=Path(frozen["run_dir"]),
                arm=arm,
                benchmark="spider2-dbt",
                spider2=self.recipe.spider2,
                allow_unavailable=True,  # they count 0 and are named; a sealed audit never skips an instance
                spider2_results=results,
            )
        evaluate = evaluate_py(results, self.recipe.spider2)
        self.say(f"{name}: official {report['official']}/{report['n']}; {evaluate['says']}")
        return {
            **_summary(run_dir, report),
            "submitted": report["submitted"],
            "results_dir": str(results),
            "evaluate_py": evaluate,
            "unplayable": unplayable(report),
        }

    def _spider2_trained(self) -> dict[str, Any]:
        return self._spider2("recipe")

    def _spider2_base(self) -> dict[str, Any]:
        return self._spider2("base")

    def _compare(self) -> dict[str, Any]:
        from dbt_harvest.eval.audit.compare import compare_runs, write_comparison

        out: dict[str, Any] = {}
        pairs = [("sealed", "sealed-base", "sealed-trained")]
        if "spider2-base" in self.planned():
            pairs.append(("spider2", "spider2-base", "spider2-trained"))
        if "dev-base" in self.planned():
            pairs.append(("dev", "dev-base", "dev-trained"))
        for label, a, b in pairs:
            comparison = compare_runs(
                Path(self.result(a)["run_dir"]), Path(self.result(b)["run_dir"]), label_a="base", label_b="trained"
            )
            paths = write_comparison(comparison, self.folder / f"compare-{label}")
            out[label] = {
                **{k: v for k, v in comparison.to_dict().items() if k not in ("tasks", "by_repo", "by_family")},
                "tasks": comparison.tasks,
                "files": {k: str(p) for k, p in paths.items()},
            }
        return out

    def _report(self) -> dict[str, Any]:
        from dbt_harvest.train.experiment_report import write_report

        paths = write_report(self.folder, self.recipe, self.state)
        return {k: str(p) for k, p in paths.items()}


def _summary(run_dir: Path, report: dict[str, Any]) -> dict[str, Any]:
    """What the state keeps of an audit: its run folder and k/N (official and strict)."""
    return {"run_dir": str(run_dir), "n": report["n"], "official": report["official"], "strict": report["strict"]}


def spider2_audited(pins: Path, recipe: str, arm: str) -> dict[str, Any] | None:
    """The recorded result of one arm's sealed Spider2 audit of ``recipe`` (the ledger's result entry), or None."""
    from dbt_harvest.eval.spider2.sealed import RESULT, entries

    return next((e for e in entries(pins) if e["event"] == RESULT and e["recipe"] == recipe and e["arm"] == arm), None)


def unplayable(report: dict[str, Any]) -> list[dict[str, str]]:
    """Every instance of a Spider2 audit that was not played (its episode could not start or crashed, or it has
    no verdict), with the reason: each counts 0 in k/N."""
    out = []
    for row in report["episodes"]:
        if row["status"] in ("crashed", "missing"):
            reason = str(row.get("error") or row.get("reason") or "no verdict").strip().splitlines() or ["?"]
            out.append({"instance_id": row["instance_id"], "status": row["status"], "reason": reason[0][:300]})
    return out


def evaluate_py(results: Path, checkout: Path) -> dict[str, Any]:
    """What the official ``evaluate.py`` prints for the databases an audit kept in Spider2's results layout,
    against the checkout's gold (``core.scorer.spider2``: k/M over the M submitted instances, or why it
    would stop with an error and print none); ``says`` is the sentence for people."""
    from dbt_harvest.core.scorer.spider2 import score_folder
    from dbt_harvest.eval.export.spider2 import GOLD_DIR

    scored = score_folder(results, checkout / GOLD_DIR)
    if scored.official_crash:
        says = f"evaluate.py stops with an error and prints no score ({scored.official_crash})"
    elif scored.official_unknown:
        says = f"evaluate.py: {scored.official_unknown} submitted instance(s) use checks not mirrored here"
    else:
        says = (
            f"evaluate.py prints: {scored.official_line} ({scored.official_score}/{scored.submitted} "
            "over the submitted instances only)"
        )
    return {
        "line": scored.official_line,
        "official": scored.official_score,
        "submitted": scored.submitted,
        "stops": scored.official_crash,
        "not_mirrored": scored.official_unknown,
        "says": says,
    }


def _run_base(run_dir: Path, base: dict[str, Any]) -> tuple[str, str | None]:
    """The base model a finished run recorded, as a loadable path or id and a revision (None: local)."""
    from dbt_harvest.eval.audit.sealed import local_base

    local = local_base(run_dir, base)
    if local is not None:
        return local, None
    revision = str(base.get("revision") or "")
    return str(base.get("id")), (revision if revision not in ("", "local") else None)


def run_experiment(
    path: Path,
    say: Callable[[str], None] = lambda _: None,
    progress: Callable[..., Any] | None = None,
    allow_underpowered: bool = False,
) -> dict[str, Any]:
    """Run (or continue) the experiment of the recipe at ``path``; -> the report's file paths and summary.
    An underpowered sealed split stops it at the ``power`` step unless ``allow_underpowered``."""
    recipe = load_recipe(path)
    experiment = Experiment(recipe, say, progress, allow_underpowered)
    experiment.run()
    return json.loads((recipe.folder / "report.json").read_text(encoding="utf-8"))
