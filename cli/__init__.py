"""The `harvest` command line: a click group whose subcommands are imported only when invoked.

Each subcommand lives in its own module (``cli/<name>.py``) exposing a click command or
group named ``command``; the table below is the only place that lists them, so `harvest --help`
stays fast (no dbt, torch or datasets import on start-up). The console script is ``run``: ``main``
as a process, which ends through ``cli._exit`` (no native-library teardown crash after a clean exit).
"""

from __future__ import annotations

import importlib
from typing import NoReturn

import click

#: subcommand name -> (module, one-line help). The module must define ``command``.
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "add": ("dbt_harvest.cli.add", "Pin a dbt repository at an exact commit, build it sandboxed, keep gold."),
    "list": ("dbt_harvest.cli.pins", "List pinned repositories."),
    "show": ("dbt_harvest.cli.show", "Show one pin: tables, rows, determinism, packages, clock."),
    "toolchain": (
        "dbt_harvest.cli.toolchain",
        "The dbt releases a pin may build under (toolchains): list, make, download wheels.",
    ),
    "demo": ("dbt_harvest.cli.demo", "Harvest the embedded example project offline, end to end."),
    "score": ("dbt_harvest.cli.score", "Score a submission against gold (official mirror + strict)."),
    "spider2": (
        "dbt_harvest.cli.spider2",
        "Spider 2.0-DBT as an audit target: import a local checkout, show its split.",
    ),
    "export": ("dbt_harvest.cli.export", "Write tasks in another benchmark's own layout (Spider 2.0-DBT)."),
    "mutants": ("dbt_harvest.cli.mutants", "Show the candidate mutations of dbt model files."),
    "mint": ("dbt_harvest.cli.mint", "Turn pinned projects into verified repair tasks."),
    "mine": ("dbt_harvest.cli.mine", "Mine a pinned repository's history for real fixes; pin and mint them as tasks."),
    "tasks": ("dbt_harvest.cli.tasks", "List or show minted tasks; rebuild a dataset's task (materialize)."),
    "serve": ("dbt_harvest.cli.serve", "Serve a dataset's tasks as an environment (OpenEnv)."),
    "split": ("dbt_harvest.cli.split", "Reserve and show repository-disjoint splits."),
    "corpus": ("dbt_harvest.cli.corpus", "The committed corpus: offline checks of pins/, the task lock, the report."),
    "lint": ("dbt_harvest.cli.lint", "Contamination and disjointness lint."),
    "dataset": ("dbt_harvest.cli.dataset", "Build Hugging Face datasets from tasks."),
    "publish": ("dbt_harvest.cli.publish", "Upload a built dataset folder to the Hugging Face Hub."),
    "audit": ("dbt_harvest.cli.audit", "Run a model over a split in the tool environment and report."),
    "train": ("dbt_harvest.cli.train", "LoRA SFT and GRPO on the train split."),
    "experiment": (
        "dbt_harvest.cli.experiment",
        "Base vs trained on the sealed split: train, freeze, audit both once, compare.",
    ),
    "gc": ("dbt_harvest.cli.gc", "List (or with --yes remove) what killed runs left under HARVEST_HOME."),
}


class LazyGroup(click.Group):
    """A click group that imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(SUBCOMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = SUBCOMMANDS.get(cmd_name)
        if entry is None:
            return None
        module = importlib.import_module(entry[0])
        return module.command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        rows = [(name, SUBCOMMANDS[name][1]) for name in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="dbt-harvest")
def main() -> None:
    """dbt-harvest: real dbt repositories in, verified repair tasks out."""
    from dbt_harvest.cli._common import guard_terminal

    guard_terminal()  # no control sequence from a repository or an agent reaches the terminal


def run() -> NoReturn:
    """The `harvest` console script and ``python -m dbt_harvest``: ``main`` as a whole process."""
    from dbt_harvest.cli._exit import end_process

    try:
        main(prog_name="harvest")
    except SystemExit as done:
        end_process(done.code)
    end_process(0)
