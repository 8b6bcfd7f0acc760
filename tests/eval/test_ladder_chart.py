"""ladder.png: every label readable (no two text boxes overlap, in either panel), and a per-family panel."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

from dbt_harvest.eval.audit.report import ladder_figure, ladder_png
from dbt_harvest.eval.ladder import RUNGS


def _report() -> dict:
    families = {
        name: {"n": 8, "official": i, "strict": max(0, i - 1)}
        for i, name in enumerate(["filter", "grain", "join", "null", "time", "values"])
    }
    return {
        "split": "dev",
        "driver": {"name": "hf"},
        "n": 48,
        "official": 15,
        "strict": 9,
        "ladder": {str(r): 3 + r for r in sorted(RUNGS)},
        "ladder_labels": {str(r): label for r, label in RUNGS.items()},
        "by_family": families,
    }


def test_labels_do_not_overlap_and_families_have_a_panel(tmp_path: Path) -> None:
    import matplotlib.pyplot as plt

    fig = ladder_figure(_report())
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        ladder, per_family = fig.axes
        assert [t.get_text().split(" (n=")[0] for t in per_family.get_yticklabels()] == sorted(_report()["by_family"])
        for ax in (ladder, per_family):
            boxes = [t.get_window_extent(renderer) for t in ax.get_yticklabels() if t.get_text()]
            assert len(boxes) >= 6
            for a, b in combinations(boxes, 2):
                assert not a.overlaps(b), (ax.get_title(), a, b)
        texts = [t for t in ladder.get_yticklabels() if t.get_text()]
        assert all(RUNGS[int(t.get_text().split(":")[0])].split()[0] in t.get_text() for t in texts)
        # the rung labels stay inside the figure (not cut at its left edge)
        assert min(t.get_window_extent(renderer).x0 for t in texts) >= 0
    finally:
        plt.close(fig)
    png = ladder_png(_report(), tmp_path / "ladder.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
