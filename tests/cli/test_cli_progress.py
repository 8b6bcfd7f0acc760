"""Progress when piped (cli/_progress.py): one-line updates on stderr at the configured interval, none for
work shorter than one interval (a quick refusal stays one `error:` line), and nothing ever on stdout."""

from __future__ import annotations

import time

import click
import pytest
from click.testing import CliRunner

from dbt_harvest.cli._progress import elapsed, progress, working


def _command(units: int, pause: float) -> click.Command:
    @click.command()
    def counted() -> None:
        with progress("job", total=units, unit="steps") as bar:
            for i in range(units):
                time.sleep(pause)
                bar.advance(1, detail=f"{i + 1} done")
        click.echo("result")

    return counted


def test_every_update_is_a_line_on_stderr_at_interval_zero() -> None:
    result = CliRunner().invoke(_command(3, 0), env={"HARVEST_PROGRESS_INTERVAL": "0"})
    assert result.exit_code == 0 and result.stdout == "result\n"
    lines = result.stderr.splitlines()
    assert [line.split(" (")[0] for line in lines] == [f"job: {i}/3 steps, {i} done" for i in (1, 2, 3)], lines


def test_updates_are_rate_limited_and_the_last_count_is_printed() -> None:
    result = CliRunner().invoke(_command(6, 0.06), env={"HARVEST_PROGRESS_INTERVAL": "0.1"})
    lines = result.stderr.splitlines()
    assert 1 <= len(lines) < 6, lines  # not one per step
    assert lines[-1].startswith("job: 6/6 steps, 6 done ("), lines


def test_short_work_prints_no_progress() -> None:
    result = CliRunner().invoke(_command(3, 0), env={"HARVEST_PROGRESS_INTERVAL": "30"})
    assert result.exit_code == 0 and result.stderr == "" and result.stdout == "result\n"


@pytest.mark.parametrize("seconds, beats", [(0.05, range(1)), (0.5, range(1, 4))])
def test_working_heartbeat(seconds: float, beats: range) -> None:
    @click.command()
    def slow() -> None:
        with working("building"):
            time.sleep(seconds)

    result = CliRunner().invoke(slow, env={"HARVEST_PROGRESS_INTERVAL": "0.15"})
    lines = result.stderr.splitlines()
    assert len(lines) in beats and all(line.startswith("building (") for line in lines), lines
    assert result.stdout == ""


def test_elapsed() -> None:
    assert (elapsed(42), elapsed(65), elapsed(3600)) == ("42s", "1m05s", "60m00s")
