"""A pool of warm reward workers with a hard per-rollout timeout that counts as 0.

A reward is a real build, and a completion can make a build hang (a cross join, a recursive CTE). A
training step must not wait on it, and a thread cannot be killed, so each worker is a process that
builds its backend ONCE (warm: imports, parsed projects, dbt runner) and then scores rollouts sent
over a pipe. A rollout that exceeds ``timeout_s`` gets RewardResult(0, 0, timeout) and its worker
is killed and replaced; a worker that dies is replaced the same way. ``workers=0`` scores inline in
the calling process (no timeout: for debugging only).

``factory`` must be picklable (a top-level class or functools.partial of one): workers are started
with the ``spawn`` method, which is safe in a process that already runs torch threads.
"""

from __future__ import annotations

import multiprocessing
import time
from collections import deque
from collections.abc import Callable, Sequence
from multiprocessing.connection import Connection, wait
from typing import Any, cast

from dbt_harvest.core.task_record import TaskRecord
from dbt_harvest.train.reward import RewardBackend, RewardResult

BackendFactory = Callable[[], RewardBackend]


def _worker_main(factory: BackendFactory, conn: Connection) -> None:
    try:
        backend = factory()
    except Exception as exc:  # report, then exit: the pool turns this into a clear error
        conn.send(("init_failed", f"{type(exc).__name__}: {exc}"))
        return
    conn.send(("ready", None))
    while True:
        try:
            message = conn.recv()
        except EOFError:
            return
        if message is None:
            return
        task, completion = message
        start = time.perf_counter()
        try:
            result = backend.score_completion(task, completion)
        except Exception as exc:
            result = RewardResult(0, 0, time.perf_counter() - start, f"error: {type(exc).__name__}: {exc}"[:300])
        conn.send(("result", result))


class _Worker:
    def __init__(self, ctx: Any, factory: BackendFactory) -> None:
        self.conn, child = ctx.Pipe(duplex=True)
        self.process = ctx.Process(target=_worker_main, args=(factory, child), daemon=True)
        self.process.start()
        child.close()

    def wait_ready(self, timeout: float) -> None:
        if not self.conn.poll(timeout):
            self.kill()
            raise RuntimeError(f"reward worker did not start within {timeout:.0f}s")
        kind, detail = self.conn.recv()
        if kind != "ready":
            self.kill()
            raise RuntimeError(f"reward worker failed to start its backend: {detail}")

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(timeout=5)
        self.conn.close()


class RewardPool:
    """Score many (task, completion) pairs on warm workers; use as a context manager."""

    def __init__(self, factory: BackendFactory, workers: int, timeout_s: float, start_timeout_s: float = 120.0) -> None:
        self.factory = factory
        self.workers = workers
        self.timeout_s = timeout_s
        self.start_timeout_s = start_timeout_s
        self._ctx = multiprocessing.get_context("spawn")
        self._idle: list[_Worker] = []
        self._inline: RewardBackend | None = None
        self.replaced = 0

    def __enter__(self) -> RewardPool:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def start(self) -> None:
        if self.workers == 0:
            self._inline = self.factory()
            return
        started = [_Worker(self._ctx, self.factory) for _ in range(self.workers)]
        try:
            for worker in started:
                worker.wait_ready(self.start_timeout_s)
        except BaseException:
            for worker in started:
                worker.kill()
            raise
        self._idle = started

    def close(self) -> None:
        for worker in self._idle:
            try:
                worker.conn.send(None)
            except (BrokenPipeError, OSError):
                pass
            worker.process.join(timeout=2)
            worker.kill()
        self._idle = []

    def _replace(self, worker: _Worker) -> None:
        worker.kill()
        fresh = _Worker(self._ctx, self.factory)
        fresh.wait_ready(self.start_timeout_s)
        self._idle.append(fresh)
        self.replaced += 1

    def score_many(self, items: Sequence[tuple[TaskRecord, str]]) -> list[RewardResult]:
        """Rewards in the order of ``items``; timeouts and dead workers give 0 with their reason."""
        if self._inline is not None:
            return [self._inline.score_completion(task, completion) for task, completion in items]
        if not self._idle:
            raise RuntimeError("the reward pool is not started (use it as a context manager)")
        results: list[RewardResult | None] = [None] * len(items)
        pending = deque(enumerate(items))
        busy: dict[Connection, tuple[int, float, float, _Worker]] = {}
        while pending or busy:
            while pending and self._idle:
                index, item = pending.popleft()
                worker = self._idle.pop()
                worker.conn.send(item)
                started = time.monotonic()
                busy[worker.conn] = (index, started, started + self.timeout_s, worker)
            soonest = min(deadline for _, _, deadline, _ in busy.values())
            for ready in wait(list(busy), timeout=max(0.0, soonest - time.monotonic())):
                conn = cast(Connection, ready)  # wait() returns some of the connections it was given
                index, started, _, worker = busy.pop(conn)
                try:
                    _, result = conn.recv()
                except (EOFError, OSError):
                    results[index] = RewardResult(0, 0, time.monotonic() - started, "error: reward worker died")
                    self._replace(worker)
                    continue
                results[index] = result
                self._idle.append(worker)
            now = time.monotonic()
            for conn in [c for c, (_, _, deadline, _) in busy.items() if deadline <= now]:
                index, started, _, worker = busy.pop(conn)
                results[index] = RewardResult(0, 0, now - started, f"timeout after {self.timeout_s:g}s")
                self._replace(worker)
        return [r for r in results if r is not None]
