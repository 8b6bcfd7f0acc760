"""The repair environment for `verifiers` (the optional extra ``verifiers``): ``load_environment(dataset, split)``.

verifiers 0.4.0 is the ``verifiers.v1`` stack (Taskset / Task / Harness / Env). It ships an OpenEnv bridge,
``verifiers.v1.tasksets.openenv``: its ``OpenEnvEnv`` resets an OpenEnv server, hands the model each observation
with the action schema, sends the model's JSON reply as the action, and scores the episode with the sum of the
step rewards (``openenv_reward``). Our OpenEnv server (``harvest serve openenv``, ``eval.adapters.openenv_server``)
rewards only ``submit``, with the official score, so that sum IS the official score: 1 for a repair that passes
the hidden check, 0 otherwise. The model's actions are the seven tools: ``{"tool": "read_file", "args":
{"path": "models/x.sql"}}``.

:func:`load_environment` is the verifiers convention: one task per row of the split (``reset`` =
``{"instance_id": ...}``), against a server at ``base_url`` that serves the same dataset and split. The
server bounds concurrency (``--max-sessions``); each session is its own workspace and sandbox. Running a
rollout needs what verifiers' harness needs (its default ``bash`` harness is launched through ``uv`` in a
runtime, and a model endpoint); the tests drive ``OpenEnvEnv.run`` with a scripted player in the model's seat.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def task_ids(dataset: str, split: str = "train") -> list[str]:
    """The instance ids of the split's rows, in the dataset's order."""
    from dbt_harvest.corpora.materialize import dataset_ref, load_rows

    return [row["instance_id"] for row in load_rows(dataset_ref(dataset), split)[split]]


def _bridge_compat() -> None:
    """verifiers 0.4.0's OpenEnv bridge reads ``client._base_url``; openenv-core 0.3.0's client keeps only
    ``_ws_url`` (``ws://host:port/ws``), so every episode failed with AttributeError before its first step.
    Give the client the attribute the bridge reads (only where it is missing; the bridge turns ws:// into
    http:// itself). Remove when the two packages agree again."""
    from openenv import GenericEnvClient

    if not hasattr(GenericEnvClient, "_base_url"):
        GenericEnvClient._base_url = property(lambda self: self._ws_url.removesuffix("/ws"))


def load_environment(
    dataset: str,
    split: str = "train",
    *,
    base_url: str = "http://127.0.0.1:8000",
    instance_ids: Sequence[str] | None = None,
    **env_args: Any,
):  # -> verifiers OpenEnvEnv
    """A verifiers environment over ``dataset``'s ``split``, played through the OpenEnv server at ``base_url``."""
    from verifiers.v1.tasksets.openenv import OpenEnvConfig, OpenEnvEnv, OpenEnvEnvConfig

    _bridge_compat()
    ids = list(instance_ids) if instance_ids is not None else task_ids(dataset, split)
    if not ids:
        raise ValueError(f"{dataset} has no tasks in its {split} split")
    taskset = OpenEnvConfig(id="openenv", base_url=base_url, resets=[{"instance_id": i} for i in ids])
    return OpenEnvEnv(OpenEnvEnvConfig(taskset=taskset, **env_args))
