"""How large a gain a paired comparison on N tasks can see: the minimum detectable effect, before any audit.

A sealed split is audited once per arm, so whether it can answer the experiment's question must be known
before it is unsealed: on 19 tasks, the exact McNemar test reaches p < 0.05 only when about six of six
discordant tasks go one way, so a realistic gain of 5–10 points is invisible and the audit would spend the
sealed split on a non-answer. This module computes the power of the test the comparison really runs
(:func:`dbt_harvest.eval.audit.compare.mcnemar_exact`, two-sided, significant below ``alpha``) and the
smallest gain in pass rate it detects with the wanted power. All of it is pure arithmetic (exact binomial
sums, no sampling), so the figure a report states is reproducible.

The discordance model (docs/EXPERIMENT.md, "Power"): the base arm passes a task with probability ``p0``
(the dev-base audit's pass rate). Training keeps each base pass except with probability ``churn`` (a task
the adapter forgets) and turns base failures into passes at the rate that makes the trained pass rate
``p0 + delta``. So per task, P(only trained passes) = delta + p0·churn and P(only base passes) = p0·churn.
The number of discordant tasks is binomial over N, and given it, the trained arm's share of them is
binomial too; the test rejects "no difference" in the gain's direction when that share is uneven enough.
``churn = 0`` is the most optimistic model (every discordant task is a gain); larger churn needs a larger
split for the same gain.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields
from functools import lru_cache
from typing import Any

ALPHA = 0.05
POWER = 0.80
#: The share of base passes the trained arm loses (the model above); stated in every report.
DEFAULT_CHURN = 0.10
#: The largest minimum detectable effect under which the sealed steps run without --allow-underpowered.
MAX_MDE = 0.10
#: Used when no dev-base audit gave a pass rate; 0.5 is stated as assumed, never hidden.
ASSUMED_BASE_RATE = 0.5
_TOLERANCE = 1e-4
#: Outer binomial terms below this weigh nothing in the power (they skip the inner sum only).
_NEGLIGIBLE = 1e-15


class PowerError(ValueError):
    """A power question with no meaning: a negative split, a rate outside [0, 1]."""


@dataclass(frozen=True)
class PowerAnalysis:
    """The minimum detectable effect of one paired comparison, with everything it was computed from.

    ``mde`` is a difference in pass rate (0.07 = 7 points), or None when no gain the base rate leaves room
    for reaches the wanted power on ``n`` tasks.
    """

    n: int
    base_rate: float
    base_rate_source: str  # "dev-base audit", "assumed", or where else it came from
    churn: float
    alpha: float
    power: float
    mde: float | None
    max_mde: float = MAX_MDE

    @property
    def underpowered(self) -> bool:
        """True when the split cannot see a gain of ``max_mde`` with the wanted power."""
        return self.mde is None or self.mde > self.max_mde + 1e-12

    def summary(self) -> str:
        """One line for a report: the MDE in points, its inputs and whether the split is underpowered."""
        seen = f"{100 * self.mde:.1f} points" if self.mde is not None else "no gain the base rate allows"
        verdict = (
            f"UNDERPOWERED (above {100 * self.max_mde:.0f} points)"
            if self.underpowered
            else f"within {100 * self.max_mde:.0f} points"
        )
        return (
            f"minimum detectable effect on {self.n} paired tasks: {seen} ({verdict}; exact McNemar, two-sided "
            f"alpha {self.alpha:g}, power {self.power:.0%}, base pass rate {self.base_rate:.1%} from "
            f"{self.base_rate_source}, churn {self.churn:.0%})"
        )

    def to_dict(self) -> dict[str, Any]:
        """The analysis as JSON-ready fields, with ``underpowered`` spelled out."""
        return {**asdict(self), "underpowered": self.underpowered}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> PowerAnalysis:
        """The analysis :meth:`to_dict` wrote (derived and added keys, e.g. ``underpowered``, ignored)."""
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data})


def _check(n: int, base_rate: float, churn: float, alpha: float, power: float) -> None:
    if n < 0:
        raise PowerError(f"a split of {n} tasks has no power")
    for name, value in (("base pass rate", base_rate), ("churn", churn)):
        if not 0.0 <= value <= 1.0:
            raise PowerError(f"{name} {value} is not a rate in [0, 1]")
    for name, value in (("alpha", alpha), ("power", power)):
        if not 0.0 < value < 1.0:
            raise PowerError(f"{name} {value} must lie strictly between 0 and 1")


@lru_cache(maxsize=4096)
def gain_threshold(discordant: int, alpha: float = ALPHA) -> int | None:
    """The fewest trained-arm wins among ``discordant`` tasks that the exact test calls significant
    (p < ``alpha``), or None when even all of them are not enough.

    The same p-value as :func:`mcnemar_exact` (the integer tail over 2**n, doubled, capped at 1), summed
    incrementally: the p-value grows with the losing side's count, so the significant splits are a prefix.
    """
    tail, threshold = 0, None
    for losses in range(discordant // 2 + 1):
        tail += math.comb(discordant, losses)
        if min(1.0, 2.0 * (tail / 2**discordant)) >= alpha:
            break
        threshold = discordant - losses
    return threshold


def _binomial_pmf(n: int, p: float) -> list[float]:
    """P(X = k) for k = 0..n, X ~ Binomial(n, p), exactly summed from the closed form."""
    if p <= 0.0:
        return [1.0] + [0.0] * n
    if p >= 1.0:
        return [0.0] * n + [1.0]
    return [math.comb(n, k) * p**k * (1.0 - p) ** (n - k) for k in range(n + 1)]


def _upper_tail(n: int, p: float, k: int) -> float:
    """P(X >= k) for X ~ Binomial(n, p), summed over the tail only."""
    if p >= 1.0:
        return 1.0
    return sum(math.comb(n, i) * p**i * (1.0 - p) ** (n - i) for i in range(k, n + 1))


def max_gain(base_rate: float, churn: float) -> float:
    """The largest gain the model allows: every base failure turned into a pass, minus what churn loses."""
    return max(0.0, (1.0 - base_rate) - base_rate * churn)


def power_at(n: int, delta: float, base_rate: float, churn: float = DEFAULT_CHURN, alpha: float = ALPHA) -> float:
    """P(the exact McNemar test on ``n`` paired tasks finds the trained arm better, p < ``alpha``) when the
    trained pass rate is ``base_rate + delta`` under the discordance model of this module."""
    _check(n, base_rate, churn, alpha, POWER)
    if not 0.0 <= delta <= max_gain(base_rate, churn) + 1e-12:
        raise PowerError(f"a gain of {delta} is outside what base rate {base_rate} and churn {churn} allow")
    losses = base_rate * churn
    gains = delta + losses
    discordance = gains + losses
    if discordance <= 0.0:
        return 0.0
    win_share = gains / discordance
    total = 0.0
    for discordant, weight in enumerate(_binomial_pmf(n, min(1.0, discordance))):
        threshold = gain_threshold(discordant, alpha)
        if weight < _NEGLIGIBLE or threshold is None:
            continue
        total += weight * _upper_tail(discordant, win_share, threshold)
    return min(1.0, total)


def minimum_detectable_effect(
    n: int,
    base_rate: float,
    churn: float = DEFAULT_CHURN,
    alpha: float = ALPHA,
    power: float = POWER,
) -> float | None:
    """The smallest gain in pass rate (to 0.0001) that the test detects with probability ``power``, or None
    when even the largest gain the base rate allows falls short. Power rises with the gain in this model,
    so the crossing is found by bisection."""
    _check(n, base_rate, churn, alpha, power)
    high = max_gain(base_rate, churn)
    if high <= 0.0 or power_at(n, high, base_rate, churn, alpha) < power:
        return None
    low = 0.0
    while high - low > _TOLERANCE:
        middle = (low + high) / 2
        if power_at(n, middle, base_rate, churn, alpha) >= power:
            high = middle
        else:
            low = middle
    return round(high, 4)


def analyse(
    n: int,
    base_rate: float | None,
    base_rate_source: str = "dev-base audit",
    churn: float = DEFAULT_CHURN,
    alpha: float = ALPHA,
    power: float = POWER,
    max_mde: float = MAX_MDE,
) -> PowerAnalysis:
    """The power analysis of a paired comparison on ``n`` tasks; a missing base rate is taken as
    :data:`ASSUMED_BASE_RATE` and said so."""
    if base_rate is None:
        base_rate, base_rate_source = ASSUMED_BASE_RATE, "assumed (no dev-base audit)"
    mde = minimum_detectable_effect(n, base_rate, churn, alpha, power)
    return PowerAnalysis(n, base_rate, base_rate_source, churn, alpha, power, mde, max_mde)
