"""A stand-in for Spider 2.0-DBT's sealed part, made from a `harvest export spider2` folder (tests and the
docs/CHAIN.md walkthrough, which cannot download the benchmark).

An export of our own train or dev tasks is not the benchmark: every instance is a development instance and
there is no sealed part (``eval.spider2.audit.part_instances``). This copies the export and gives its first
``count`` instances the first ids of the committed split's sealed part (``eval/spider2/split.json``), so
the copy reads as the benchmark with those instances present and playable, and the rest of the sealed part
absent (each then counts 0 and is named, as an instance not unpacked would). The copy is what the
experiment's Spider2 leg and `harvest audit --benchmark spider2-dbt --split sealed` audit; the export
itself is left as it is.

    python tests/e2e/spider2_as_sealed.py EXPORT DEST [COUNT]     # prints {exported id: sealed id}
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

TASKS = Path("examples") / "spider2-dbt.jsonl"
EVALS = Path("evaluation_suite") / "gold" / "spider2_eval.jsonl"


def as_sealed(export: Path, dest: Path, count: int | None = None) -> dict[str, str]:
    """Copy ``export`` to ``dest``, its first ``count`` instances (sorted; None: all) renamed to the first
    sealed ids of the committed split and the others left out of the metadata; -> exported id -> sealed id."""
    from dbt_harvest.eval.spider2.split import committed

    ids = sorted(json.loads(line)["instance_id"] for line in (export / TASKS).read_text().splitlines())
    names = dict(zip(ids[:count], committed().sealed, strict=False))
    shutil.copytree(export, dest, symlinks=True)
    for old in ids[len(names) :]:  # left out: not in the metadata, and not on disk
        for folder in (dest / "examples", dest / "evaluation_suite" / "gold"):
            shutil.rmtree(folder / old)
        (dest / "evaluation_suite" / "reference" / f"{old}.patch").unlink(missing_ok=True)
    for old, new in names.items():
        for folder in (dest / "examples", dest / "evaluation_suite" / "gold"):
            (folder / old).rename(folder / new)
        reference = dest / "evaluation_suite" / "reference" / f"{old}.patch"
        if reference.exists():
            reference.rename(reference.with_name(f"{new}.patch"))
    for path in (dest / TASKS, dest / EVALS, dest / "spider2-dbt.jsonl"):
        if path.exists():
            lines = [json.loads(x) for x in path.read_text().splitlines()]
            kept = [{**x, "instance_id": names[x["instance_id"]]} for x in lines if x["instance_id"] in names]
            path.write_text("".join(json.dumps(x) + "\n" for x in kept))
    return names


if __name__ == "__main__":
    export_dir, dest_dir, *rest = sys.argv[1:]
    print(json.dumps(as_sealed(Path(export_dir), Path(dest_dir), int(rest[0]) if rest else None)))
