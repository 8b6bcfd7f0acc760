"""Executors: where shards run. A local process pool by default; Ray for more than one machine.

Both run the same ``run_shard`` function and yield results as they complete; the driver writes them.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed

from dbt_harvest.core.errors import HarvestError
from dbt_harvest.harvester.mint.shard import ShardJob, ShardResult, run_shard


class ExecutorError(HarvestError):
    """The requested executor cannot run (e.g. Ray is not installed or not reachable)."""


def run_local(jobs: Sequence[ShardJob], workers: int) -> Iterator[tuple[ShardJob, ShardResult]]:
    if workers <= 1:
        for job in jobs:
            yield job, run_shard(job)
        return
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
        futures = {pool.submit(run_shard, job): job for job in jobs}
        for future in as_completed(futures):
            yield futures[future], future.result()


def run_ray(jobs: Sequence[ShardJob], address: str | None) -> Iterator[tuple[ShardJob, ShardResult]]:
    try:
        import ray
    except ImportError:
        raise ExecutorError("--executor ray needs the ray extra: pip install 'dbt-harvest[ray]'") from None
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started_here = not ray.is_initialized()
    if started_here:
        try:
            ray.init(
                address=address,
                include_dashboard=False,
                log_to_driver=False,
                runtime_env={"env_vars": {"RAY_USAGE_STATS_ENABLED": "0"}},
            )
        except Exception as exc:  # ray raises many types for an unreachable cluster
            raise ExecutorError(f"cannot connect to Ray at {address or 'a new local instance'}: {exc}") from None
    remote = ray.remote(run_shard)
    try:
        pending = {remote.remote(job): job for job in jobs}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                job = pending.pop(ref)
                yield job, ray.get(ref)
    finally:
        if started_here:
            ray.shutdown()
