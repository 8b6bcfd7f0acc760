"""`harvest audit compare`: paired outcomes, exact McNemar, the bootstrap interval, and a real pair of audits.

The statistics are checked against values worked out by hand; the end-to-end case compares two real
audits of the same dev tasks (the oracle and the no-op driver, real sandboxed builds) — a difference of
N tasks that, with N = 3, is still not distinguishable from noise, which is exactly what the report must say.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from dbt_harvest.eval.audit.compare import (
    CompareError,
    compare_reports,
    compare_runs,
    mcnemar_exact,
    paired_bootstrap,
    paired_table,
    to_markdown,
    write_comparison,
)


@pytest.mark.parametrize(
    ("only_a", "only_b", "expected"),
    [
        (0, 0, 1.0),
        (0, 1, 1.0),
        (0, 5, 2 / 32),  # 2 * P(X <= 0), X ~ Bin(5, 1/2)
        (0, 6, 2 / 64),
        (1, 9, 2 * 11 / 1024),  # 2 * (C(10,0) + C(10,1)) / 2^10
        (2, 2, 1.0),
        (3, 1, 2 * 5 / 16),  # symmetric in A and B
        (1, 3, 2 * 5 / 16),
    ],
)
def test_exact_mcnemar_matches_the_binomial_tail_worked_by_hand(only_a: int, only_b: int, expected: float) -> None:
    assert mcnemar_exact(only_a, only_b) == pytest.approx(expected)


def test_paired_table_counts_each_cell() -> None:
    table = paired_table([1, 1, 0, 0, 1], [1, 0, 1, 0, 1])
    assert (table.both, table.only_a, table.only_b, table.neither, table.n, table.discordant) == (2, 1, 1, 1, 5, 2)
    with pytest.raises(ValueError):
        paired_table([1], [1, 0])


def test_bootstrap_interval_is_degenerate_when_nothing_varies_and_reproducible() -> None:
    assert paired_bootstrap([1, 0, 1], [1, 0, 1]) == (0.0, 0.0)
    assert paired_bootstrap([0, 0, 0], [1, 1, 1]) == (1.0, 1.0)
    a, b = [0, 1, 0, 1, 0, 0, 1, 0], [1, 1, 0, 1, 1, 0, 1, 1]
    low, high = paired_bootstrap(a, b, seed=3)
    assert paired_bootstrap(a, b, seed=3) == (low, high)
    assert low <= (sum(b) - sum(a)) / len(a) <= high


def _report(outcomes: list[int], split: str = "dev", sha: str = "s" * 64, name: str = "m") -> dict[str, Any]:
    """A report of build_report's shape, for the pure statistics (the end-to-end test uses real runs)."""
    # every third task a completion; the others carry no kind, as a run folder from before completions
    episodes = [
        {
            "instance_id": f"t{i:02d}",
            "family": ("filter", "grain")[i % 2],
            "repo": "acme/shop",
            "official": o,
            "strict": o,
            "rung": 6 if o else 5,
            **({"kind": "completion"} if i % 3 == 0 else {}),
        }
        for i, o in enumerate(outcomes)
    ]
    return {
        "split": split,
        "task_set_sha256": sha,
        "driver": {"name": name},
        "strict": sum(outcomes),
        "ladder": {"6": sum(outcomes), "5": len(outcomes) - sum(outcomes)},
        "ladder_labels": {"5": "official fails", "6": "official passes"},
        "episodes": episodes,
    }


def test_two_tasks_out_of_48_is_noise_and_ten_is_not() -> None:
    base = [1] * 20 + [0] * 28
    plus_two = [1] * 22 + [0] * 26
    noise = compare_reports(_report(base), _report(plus_two))
    assert (noise.official_a, noise.official_b, noise.table.only_b, noise.table.only_a) == (20, 22, 2, 0)
    assert not noise.distinguishable and noise.p_value == pytest.approx(0.5)
    assert "NOT distinguishable" in noise.summary()
    plus_ten = [1] * 30 + [0] * 18
    signal = compare_reports(_report(base), _report(plus_ten))
    assert signal.distinguishable and signal.p_value == pytest.approx(2 / 1024)
    assert signal.ci_low > 0
    assert signal.by_family["filter"]["official_b"] - signal.by_family["filter"]["official_a"] == 5
    # per kind: tasks 20..29 moved; 21, 24, 27 of them are completions
    assert signal.by_kind == {
        "completion": {"n": 16, "official_a": 7, "official_b": 10},
        "repair": {"n": 32, "official_a": 13, "official_b": 20},
    }
    assert "## By kind" in to_markdown(signal) and "| completion | 16 | 7 | 10 | +3 |" in to_markdown(signal)


def test_a_comparison_states_the_gain_it_could_have_seen() -> None:
    """The minimum detectable effect of N paired tasks, with run A's pass rate as the base (eval.audit.power)."""
    from dbt_harvest.eval.audit.power import minimum_detectable_effect

    small = compare_reports(_report([1] * 20 + [0] * 28), _report([1] * 22 + [0] * 26))
    assert small.power["n"] == 48 and small.power["base_rate"] == pytest.approx(20 / 48)
    assert small.power["mde"] == minimum_detectable_effect(48, 20 / 48)
    assert small.power["underpowered"] is True and small.power["base_rate_source"] == "run A (m)"
    assert "minimum detectable effect on 48 paired tasks" in to_markdown(small)
    strict = compare_reports(_report([1] * 20 + [0] * 28), _report([1] * 22 + [0] * 26), alpha=0.01)
    assert strict.power["alpha"] == 0.01 and strict.power["mde"] > small.power["mde"]


def test_runs_over_different_tasks_or_splits_are_refused() -> None:
    with pytest.raises(CompareError, match="different task sets"):
        compare_reports(_report([1, 0]), _report([1, 0], sha="t" * 64))
    with pytest.raises(CompareError, match="different splits"):
        compare_reports(_report([1, 0]), _report([1, 0], split="test"))


@pytest.mark.slow
def test_compare_two_real_audits_of_the_same_dev_tasks(dev_world, tmp_path: Path) -> None:
    from click.testing import CliRunner

    from dbt_harvest.cli import main
    from dbt_harvest.eval.audit.report import write_report
    from dbt_harvest.eval.audit.rundir import RunDir
    from dbt_harvest.eval.audit.runner import AuditOptions, run_audit
    from dbt_harvest.eval.drivers import make_driver

    runs = {}
    with dev_world.env():
        for name in ("noop", "oracle"):
            run = RunDir(tmp_path / name)
            run_audit(run, "dev", dev_world.tasks, make_driver(name), AuditOptions(workers=2), pins=dev_world.pins)
            write_report(run)
            runs[name] = run.root
    n = len(dev_world.tasks)
    c = compare_runs(runs["noop"], runs["oracle"])
    assert (c.n, c.official_a, c.official_b) == (n, 0, n)
    assert (c.table.only_b, c.table.only_a) == (n, 0)
    assert c.rung_moves == {"5->6": n}
    assert c.p_value == pytest.approx(mcnemar_exact(0, n))
    assert c.distinguishable == (mcnemar_exact(0, n) < 0.05)
    paths = write_comparison(c, tmp_path / "cmp")
    assert paths["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"oracle {n}/{n} vs noop 0/{n}" in paths["md"].read_text()

    result = CliRunner().invoke(
        main, ["audit", "compare", str(runs["noop"]), str(runs["oracle"]), "--out", str(tmp_path / "cli"), "--json"]
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["official_a"], data["official_b"], data["distinguishable"]) == (0, n, c.distinguishable)
    assert (tmp_path / "cli" / "compare.md").is_file()
    assert data["power"]["n"] == n and data["power"]["base_rate"] == 0.0
    human = CliRunner().invoke(
        main, ["audit", "compare", str(runs["noop"]), str(runs["oracle"]), "--out", str(tmp_path / "h")]
    )
    assert human.exit_code == 0 and f"minimum detectable effect on {n} paired tasks" in human.stdout
    refused = CliRunner().invoke(main, ["audit", "compare", str(runs["noop"]), str(tmp_path / "nothing")])
    assert refused.exit_code == 1 and "not an audit run folder" in refused.output
