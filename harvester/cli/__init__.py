"""The `harvest` command line: a click group whose subcommands are imported only when invoked.

Each subcommand lives in its own module (``harvester/cli/<name>.py``) exposing a click command or
group named ``command``; the table below is the only place that lists them, so `harvest --help`
stays fast (no dbt, torch or datasets import on start-up).
"""

from __future__ import annotations

import importlib
import importlib.util

import click

#: subcommand name -> (module, one-line help). The module must define ``command``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "add": ("harvester.cli.add", "Pin a dbt repository at an exact commit, build it sandboxed, keep gold."),
    "list": ("harvester.cli.pins", "List pinned repositories."),
    "show": ("harvester.cli.show", "Show one pin: tables, rows, determinism, packages, clock."),
    "demo": ("harvester.cli.demo", "Harvest the embedded example project offline, end to end."),
    "score": ("harvester.cli.score", "Score a submission against gold (official mirror + strict)."),
    "mutants": ("harvester.cli.mutants", "Show the candidate mutations of dbt model files."),
    "mint": ("harvester.cli.mint", "Turn pinned projects into verified repair tasks."),
    "tasks": ("harvester.cli.tasks", "List or show minted tasks."),
    "split": ("harvester.cli.split", "Reserve and show repository-disjoint splits."),
    "lint": ("harvester.cli.lint", "Contamination and disjointness lint."),
    "dataset": ("harvester.cli.dataset", "Build Hugging Face datasets from tasks."),
    "publish": ("harvester.cli.publish", "Upload a built dataset folder to the Hugging Face Hub."),
    "audit": ("harvester.cli.audit", "Run a model over a split in the tool environment and report."),
    "train": ("harvester.cli.train", "LoRA SFT and GRPO on the train split."),
    "bench": ("harvester.cli.bench", "Benchmarks that print ratios against an in-process baseline."),
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(name for name, (module, _) in SUBCOMMANDS.items() if _module_exists(module))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = SUBCOMMANDS.get(cmd_name)
        if entry is None or not _module_exists(entry[0]):
            return None
        module = importlib.import_module(entry[0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUBCOMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


def _module_exists(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dbt-harvest")
def main() -> None:
    """dbt-harvest: real dbt repositories in, verified repair tasks out."""

