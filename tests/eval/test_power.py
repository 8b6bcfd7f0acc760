"""The minimum detectable effect against exact binomial cases computed another way.

eval/audit/power.py sums the power in two stages (how many tasks are discordant, then how many of them the
trained arm wins). The references here enumerate the full trinomial outcome of N paired tasks instead
(trained-only wins, base-only wins, concordant) and apply the comparison's own test to each outcome, so a
mistake in the decomposition, the threshold or the tail sums shows as a different number.
"""

from __future__ import annotations

import math

import pytest

from dbt_harvest.eval.audit.compare import mcnemar_exact
from dbt_harvest.eval.audit.power import (
    ASSUMED_BASE_RATE,
    PowerAnalysis,
    PowerError,
    analyse,
    gain_threshold,
    max_gain,
    minimum_detectable_effect,
    power_at,
)


def enumerated_power(n: int, delta: float, base_rate: float, churn: float, alpha: float = 0.05) -> float:
    """P(significant gain) by enumerating every (wins, losses, ties) outcome of n tasks."""
    losses_p = base_rate * churn
    wins_p = delta + losses_p
    ties_p = 1.0 - wins_p - losses_p
    total = 0.0
    for wins in range(n + 1):
        for losses in range(n - wins + 1):
            if wins > losses and mcnemar_exact(losses, wins) < alpha:
                ties = n - wins - losses
                ways = math.factorial(n) // (math.factorial(wins) * math.factorial(losses) * math.factorial(ties))
                total += ways * wins_p**wins * losses_p**losses * ties_p**ties
    return total


@pytest.mark.parametrize("discordant", range(90))
def test_the_gain_threshold_is_the_comparisons_own_test(discordant: int) -> None:
    significant = [w for w in range(discordant + 1) if w > discordant - w and mcnemar_exact(discordant - w, w) < 0.05]
    assert gain_threshold(discordant) == (min(significant) if significant else None)
    # the significant splits are every split from the threshold up
    if significant:
        assert significant == list(range(min(significant), discordant + 1))


@pytest.mark.parametrize(
    ("n", "delta", "base_rate", "churn"),
    [(19, 0.3, 0.3, 0.1), (19, 0.45, 0.0, 0.0), (24, 0.2, 0.5, 0.2), (30, 0.15, 0.25, 0.05), (12, 0.6, 0.1, 0.0)],
)
def test_power_matches_the_enumerated_outcomes(n: int, delta: float, base_rate: float, churn: float) -> None:
    assert power_at(n, delta, base_rate, churn) == pytest.approx(
        enumerated_power(n, delta, base_rate, churn), abs=1e-12
    )


def test_six_tasks_with_no_churn_need_all_six_to_go_one_way() -> None:
    # 2 * 0.5**6 = 0.031 < 0.05 but 2 * 0.5**5 = 0.0625: only 6 of 6 discordant tasks is significant, so with
    # no base passes and no churn the power is P(all six tasks flip) = delta**6 exactly
    for delta in (0.5, 0.9, 0.97):
        assert power_at(6, delta, 0.0, 0.0) == pytest.approx(delta**6, rel=1e-12)
    assert minimum_detectable_effect(6, 0.0, churn=0.0) == pytest.approx(0.8 ** (1 / 6), abs=1e-4)


def test_nineteen_tasks_cannot_see_a_realistic_gain() -> None:
    # the issue's own figure: on today's sealed 19 tasks a gain must be about 30 points or more
    crossing = _bisect(lambda d: enumerated_power(19, d, 0.3, 0.1), 0.0, max_gain(0.3, 0.1))
    mde = minimum_detectable_effect(19, 0.3)
    assert mde == pytest.approx(crossing, abs=2e-4)
    assert mde is not None and mde > 0.3
    assert analyse(19, 0.3).underpowered


def test_the_detectable_effect_shrinks_as_the_split_grows() -> None:
    figures = [minimum_detectable_effect(n, 0.3) for n in (19, 74, 150, 300)]
    assert all(f is not None for f in figures)
    assert figures == sorted(figures, reverse=True) and len(set(figures)) == 4
    assert not analyse(300, 0.3).underpowered  # 300 tasks see a gain under 10 points at a 30% base rate


def test_no_gain_is_detectable_when_the_base_leaves_no_room() -> None:
    assert minimum_detectable_effect(19, 1.0) is None
    analysis = analyse(19, 0.97)
    assert analysis.mde is None and analysis.underpowered
    assert "no gain the base rate allows" in analysis.summary()


def test_a_missing_base_rate_is_assumed_and_said() -> None:
    analysis = analyse(150, None)
    assert analysis.base_rate == ASSUMED_BASE_RATE
    assert "assumed" in analysis.base_rate_source and "assumed" in analysis.summary()
    assert analysis.to_dict()["underpowered"] is analysis.underpowered
    # what a report stores reads back as the same analysis (keys a report adds are ignored)
    assert PowerAnalysis.from_dict({**analysis.to_dict(), "allowed_underpowered": True}) == analysis


@pytest.mark.parametrize(
    ("n", "base_rate", "churn"), [(-1, 0.3, 0.1), (10, 1.2, 0.1), (10, 0.3, -0.1), (10, float("nan"), 0.1)]
)
def test_meaningless_questions_are_refused(n: int, base_rate: float, churn: float) -> None:
    with pytest.raises(PowerError):
        minimum_detectable_effect(n, base_rate, churn)


def test_a_gain_beyond_the_model_is_refused() -> None:
    with pytest.raises(PowerError, match="outside"):
        power_at(10, 0.9, 0.3, 0.1)


def _bisect(power: object, low: float, high: float, want: float = 0.8) -> float:
    assert callable(power)
    while high - low > 1e-5:
        middle = (low + high) / 2
        low, high = (low, middle) if power(middle) >= want else (middle, high)
    return high
