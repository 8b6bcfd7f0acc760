"""Whether the suite runs from a git checkout of dbt-harvest, for the few tests whose expectation differs.

From an sdist (or any unpacked copy without ``.git``) the code has no commit to record; a test that checks
the recorded commit asks this module instead of failing there.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
IN_CHECKOUT = (ROOT / ".git").exists()
