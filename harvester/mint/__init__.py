"""`harvest mint`: pinned projects in, verified repair tasks out.

The pipeline (see ``pipeline.py`` for the order of its stages in one place):
candidates (mutators over each model's raw SQL) -> screen (compiled SQL of the mutant and its
descendants re-run in a locked-down in-process DuckDB against the pin's built state, scored against
gold) -> confirm (real sandboxed dbt builds: mutant, true repair, wrong repairs) -> task records.
"""

import logging

# sqlglot warns "contains unsupported syntax. Falling back to parsing as a 'Command'" for every statement it
# cannot parse (Fivetran's compiled SQL: thousands per mint, burying the progress bar). Such a statement
# simply offers no mutation site; errors still show.
logging.getLogger("sqlglot").setLevel(logging.ERROR)
