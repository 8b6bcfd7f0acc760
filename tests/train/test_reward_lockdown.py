"""The single-turn reward's build paths against hostile completions (issue 14, classes 2 and 3).

A GRPO completion is SQL a model wrote; the reward runs it on the fast path (in the trainer's own
process, on core.locked_duckdb) or in a sandboxed dbt build (DuckDB scope 'database': no folder of the
workspace is writable). Completions written for this repository try to read a host file, write into a
host folder, and COPY a byte-exact Python model into the project (class 2's route, here through the
reward); each scores 0, its reason never carries the secret, and the host victims are untouched.
"""

from __future__ import annotations

from pathlib import Path

import pytest

SECRET = "TOPSECRET-reward-5c1d"
PYTHON_MODEL = "def model(dbt, session):\n    return session.sql(\"select 'ran' as pwned\")\n"


def _fixed(task) -> str:
    from dbt_harvest.core.home import pins_dir
    from dbt_harvest.core.patching import apply_to_text, parse_patch
    from dbt_harvest.core.pin import pin_path, read_pin
    from dbt_harvest.harvester.workspace import template

    pin = read_pin(pin_path(task.pin, pins_dir()))
    original = (template(pin) / task.file).read_text(encoding="utf-8")
    broken = apply_to_text(original, parse_patch(task.broken_patch)[0])
    return apply_to_text(broken, parse_patch(task.fix_patch)[0])


def _copy_python_model(path: str) -> str:
    """A DuckDB COPY writing PYTHON_MODEL byte for byte to ``path`` (CSV, no quoting, no header)."""
    rows = " union all ".join(
        f"select {i} as n, '{line.replace(chr(39), chr(39) * 2)}' as line"
        for i, line in enumerate(PYTHON_MODEL.splitlines())
    )
    return f"copy (select line from ({rows}) order by n) to '{path}' (format csv, header false, quote '', escape '')"


@pytest.fixture()
def victim(tmp_path: Path) -> Path:
    folder = tmp_path / "victim"
    folder.mkdir()
    (folder / "secret.csv").write_text(f"value\n{SECRET}\n")
    return folder


def _victim_state(folder: Path) -> list[tuple[str, bytes, int]]:
    return [(p.name, p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir())]


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["fast", "dbt"])
@pytest.mark.parametrize("attack", ["read_host", "write_host", "attach_host"])
def test_a_completion_cannot_touch_the_host_through_the_reward(
    minted_example, victim: Path, mode: str, attack: str
) -> None:
    from dbt_harvest.harvester.grading.edited import grade

    sql = {
        "read_host": f"select * from read_csv('{victim / 'secret.csv'}')",
        "write_host": f"select * from (select 1 as x) where x = 0; copy (select 1) to '{victim / 'written.csv'}'",
        "attach_host": f"attach '{victim / 'stolen.duckdb'}' as stolen",
    }[attack]
    before = _victim_state(victim)
    with minted_example.env():
        task = minted_example.tasks[0]
        verdict = grade(task, {task.file: sql}, mode)
        path = verdict.path
    assert verdict.official == 0, (path, verdict)
    assert SECRET not in verdict.reason
    assert _victim_state(victim) == before


@pytest.mark.slow
def test_a_reward_build_cannot_write_into_the_project_with_sql(minted_example) -> None:
    """The true repair plus a pre_hook that COPYs a Python model into the project: DuckDB scope
    'database' refuses the write, so the rollout fails (before: the hook wrote models/pwned.py and the
    rollout scored 1)."""
    from dbt_harvest.harvester.grading.edited import grade

    with minted_example.env():
        task = minted_example.tasks[0]
        fixed = _fixed(task)
        assert grade(task, {task.file: fixed}, "dbt").official == 1
        folder = str(Path("/workspace") / Path(task.file).parent)
        hook = _copy_python_model(f"{folder}/pwned.py").replace('"', '\\"')
        hooked = f'{{{{ config(pre_hook="{hook}") }}}}\n{fixed}'
        for mode in ("fast", "dbt"):  # fast refuses the config change and falls back to the build
            verdict = grade(task, {task.file: hooked}, mode)
            path = verdict.path
            assert path == "dbt" and verdict.official == 0, (mode, path, verdict)
            assert "disabled" in verdict.reason or "Permission" in verdict.reason, verdict.reason
