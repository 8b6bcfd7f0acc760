"""The sandbox seen from the agent: neither `query` nor a `dbt` build of an agent-written model can read
a file outside the workspace, and the workspace holds no .git, no gold and nothing of the repair."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from dbt_harvest.eval.env import EnvSettings, RepairEnvironment

pytestmark = pytest.mark.slow


def test_query_and_dbt_cannot_read_outside_the_workspace(dev_world, tmp_path: Path) -> None:
    token = f"SECRET-{secrets.token_hex(8)}"
    secret = tmp_path / "secret.csv"
    secret.write_text(f"value\n{token}\n")
    task = dev_world.tasks[0]
    with dev_world.env():
        env = RepairEnvironment({task.instance_id: task}, EnvSettings(pins=dev_world.pins))
        with env:
            env.reset(instance_id=task.instance_id)
            root = env.episode.workspace.root
            # what the workspace holds: the broken file, no history, no gold, nothing of the repair
            assert not list(root.rglob(".git"))
            assert not list(root.rglob("*.duckdb"))
            broken = env.read_file(task.file)
            assert "payment_status = 'succeeded'" not in broken and "payment_status != 'failed'" not in broken
            evil = f"select * from read_csv_auto('{secret}')\n"
            assert env.write_file("models/evil.sql", evil).startswith("created")
            built = env.dbt("build", "evil")
            assert "FAILED" in built and token not in built
            assert (root / "build.duckdb").exists()  # the run made the database the query reads
            for sql in (
                f"select * from read_csv_auto('{secret}')",
                f"select * from read_text('{secret}')",
                "select * from read_text('/etc/hostname')",
                f"attach '{tmp_path / 'x.duckdb'}' as x",
            ):
                answer = env.query(sql)
                assert answer.startswith("query error") and token not in answer, (sql, answer)
            assert not (tmp_path / "x.duckdb").exists()
            transcript = str(env.episode.transcript)
            assert token not in transcript
