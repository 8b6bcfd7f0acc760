"""``python -m dbt_harvest``: the `harvest` command line, for environments without the console script."""

from dbt_harvest.cli import run

if __name__ == "__main__":
    run()
