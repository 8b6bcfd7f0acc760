"""``python -m dbt_harvest``: the `harvest` command line, for environments without the console script."""

from dbt_harvest.cli import main

if __name__ == "__main__":
    main(prog_name="harvest")
