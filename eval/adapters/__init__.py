"""Adapters that serve the repair environment to other RL frameworks (optional extras: `openenv`)."""
