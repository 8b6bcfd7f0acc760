"""Drivers that play episodes in the tool environment: oracle, noop, wrong (known answers), openai, hf (models).

``make_driver(name, **options)`` builds one (registry.py); base.py says what a driver must do, chat.py holds
the loop the model drivers share.
"""

from dbt_harvest.eval.drivers.base import Driver, DriverError
from dbt_harvest.eval.drivers.registry import DRIVERS, make_driver

__all__ = ["DRIVERS", "Driver", "DriverError", "make_driver"]
