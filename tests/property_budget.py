"""How many cases a costly property test draws: the deep run's count, or a fifth of it by default.

The default suite must stay within its time budget on two cores, so ``tests/conftest.py`` runs hypothesis
under the ``harvest`` profile (100 examples where a test does not say). ``--hypothesis-profile=deep``
(500) restores every costly property test to its full count, e.g. the scorer's fast-vs-reference
property at 2,500 examples x 4 tables (10,000 cases) instead of 500 x 4. Public API only: the active
profile is ``hypothesis.settings.default``. The same profile decides how many enumerated variants an
agreement test plays (``variants``): every one under ``deep``, a set that covers each path by default.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")

DEFAULT_EXAMPLES = 100
DEEP_EXAMPLES = 500


def cases(deep: int, floor: int = 50) -> int:
    """``deep`` under the deep profile; otherwise the same share of it as the profiles' ratio (1/5)."""
    from hypothesis import settings

    active = settings.default.max_examples
    if active >= DEEP_EXAMPLES:
        return deep
    return max(floor, deep * active // DEEP_EXAMPLES)


def variants(every: dict[str, T], default: tuple[str, ...]) -> dict[str, T]:
    """An agreement test's enumerated variants: all of them under the deep profile, in the default run only
    the ``default`` names (each of which takes a path of the code under test that the others do not)."""
    from hypothesis import settings

    if settings.default.max_examples >= DEEP_EXAMPLES:
        return dict(every)
    missing = [name for name in default if name not in every]
    if missing:
        raise KeyError(f"default variants {missing} are not among {sorted(every)}")
    return {name: every[name] for name in every if name in default}
