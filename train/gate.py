"""--gate: one optimizer step with the full config, then peak memory, step time, projected wall time.

Before a long run, a user needs to know that the real sequence length and batch fit and what the run
will cost. The gate builds the exact trainer of the run (same model, data, lengths, batch, LoRA), runs
ONE optimizer step into a scratch folder, measures it, and stops: no checkpoint, no adapter, no
manifest. The projection multiplies the measured step by the run's step count; the first step also
pays one-time costs (kernel selection, reward workers starting), so it errs long.
"""

from __future__ import annotations

import math
import resource
import time
from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class GateReport:
    kind: str
    step_seconds: float
    total_steps: int
    projected_seconds: float
    peak_memory_bytes: int
    peak_memory_source: str  # "cuda" (max allocated by torch) or "cpu-rss" (process peak resident set)
    tokens_per_step: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def lines(self) -> list[str]:
        return [
            f"{self.kind} gate: one optimizer step in {self.step_seconds:.2f}s",
            f"peak memory: {self.peak_memory_bytes / 2**30:.2f} GiB ({self.peak_memory_source})",
            f"run: {self.total_steps} steps, projected {_hms(self.projected_seconds)}",
        ]


def _hms(seconds: float) -> str:
    minutes, secs = divmod(int(round(seconds)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s"


def planned_steps(max_steps: int, epochs: float, rows: int, samples_per_row: int, per_step: int) -> int:
    """Optimizer steps of the full run: max_steps if set, else epochs over the samples."""
    if max_steps > 0:
        return max_steps
    return max(1, math.ceil(epochs * rows * samples_per_row / max(1, per_step)))


class _StepTimer:
    """A TrainerCallback (duck-typed; registered via add_callback) timing the optimizer step."""

    def __init__(self) -> None:
        self.began = 0.0
        self.seconds = 0.0

    def __getattr__(self, name: str) -> Any:  # every other callback event is a no-op
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)

    def on_step_begin(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.began = time.perf_counter()

    def on_step_end(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
        self.seconds = time.perf_counter() - self.began


def run_gate(trainer: Any, kind: str, total_steps: int, tokens_per_step: int) -> GateReport:
    """Run one step of ``trainer`` (built with max_steps=1) and report."""
    import torch

    timer = _StepTimer()
    trainer.add_callback(timer)
    cuda = torch.cuda.is_available()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    wall = time.perf_counter()
    trainer.train()
    step = timer.seconds or (time.perf_counter() - wall)
    if cuda:
        peak, source = int(torch.cuda.max_memory_allocated()), "cuda"
    else:
        peak, source = int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024, "cpu-rss"
    return GateReport(kind, round(step, 4), total_steps, round(step * total_steps, 1), peak, source, tokens_per_step)
