"""Fixtures for the corpora tests (the helpers live in corpora_world.py)."""

from corpora_world import make, reserved, world  # noqa: F401
