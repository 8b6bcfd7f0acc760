"""Drivers by name: the table of every driver the audit can run, and ``make_driver``.

Each entry names its class as ``module:Class``; the module is imported only when that driver is made, so
choosing ``oracle`` never imports torch (``hf``) or openai. The concrete drivers import ``base`` (what a
driver is); ``base`` imports none of them, and this registry is the only module that knows them all.
"""

from __future__ import annotations

import importlib
from typing import Any

from dbt_harvest.eval.drivers.base import Driver
from dbt_harvest.eval.env.errors import EnvError

#: name -> (class path, whether the driver takes options: model, base_url, adapter, ...)
REGISTRY: dict[str, tuple[str, bool]] = {
    "oracle": ("dbt_harvest.eval.drivers.scripted:OracleDriver", False),
    "noop": ("dbt_harvest.eval.drivers.scripted:NoopDriver", False),
    "wrong": ("dbt_harvest.eval.drivers.scripted:WrongDriver", False),
    "openai": ("dbt_harvest.eval.drivers.openai:OpenAIDriver", True),
    "hf": ("dbt_harvest.eval.drivers.hf:HFDriver", True),
}
DRIVERS: tuple[str, ...] = tuple(REGISTRY)


def driver_class(name: str) -> type:
    """The class registered as ``name`` (its module imported now); EnvError naming the choices if none."""
    if name not in REGISTRY:
        raise EnvError(f"unknown driver {name!r}; one of {', '.join(DRIVERS)}")
    module, _, attribute = REGISTRY[name][0].partition(":")
    return getattr(importlib.import_module(module), attribute)


def make_driver(name: str, **options: Any) -> Driver:
    """A driver by name; options are the driver's own (model, base_url, adapter, ...)."""
    cls = driver_class(name)
    return cls(**options) if REGISTRY[name][1] else cls()
