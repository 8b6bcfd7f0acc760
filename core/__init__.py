"""The floor every layer stands on: shared records, paths and the scorer; imports nothing of ours above it.

Records: the pin (`pin.py`), the task record (`task_record.py`), the grading spec (`scorer/spec.py`);
utilities: atomic writes (`atomic.py`), errors (`errors.py`), HARVEST_HOME paths (`home.py`), patches
(`patching.py`), the pinned clock (`clock.py`), licenses and tool versions; and the scorer (`scorer/`:
tables in, verdicts out — the official Spider 2.0 check mirrored exactly, plus the strict check).
Layers, bottom to top: core < mutators < harvester < corpora < eval < train < cli (tests/test_layers.py).
"""
