"""A RepairEnvironment that remembers what trl did with it (resets, rewards), for the multi-turn GRPO test.

It is the real environment (real workspaces, real tools, real grading); it only appends to class-level
lists, because trl constructs and pools the instances itself.
"""

from __future__ import annotations

from typing import Any

from dbt_harvest.eval.env import RepairEnvironment


class RecordingEnvironment(RepairEnvironment):
    resets: list[str] = []
    rewards: list[float] = []
    instances: int = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        type(self).instances += 1

    def reset(self, **row: Any) -> str:
        """Start the episode of the row's task (``instance_id``); return the initial observation."""
        observation = super().reset(**row)
        type(self).resets.append(row["instance_id"])
        return observation

    def get_reward(self) -> float:
        """The official score of the submission: 1.0 or 0.0 (0.0 when nothing was submitted)."""
        reward = super().get_reward()
        type(self).rewards.append(reward)
        return reward
