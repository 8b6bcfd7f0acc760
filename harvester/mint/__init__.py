"""`harvest mint`: pinned projects in, verified repair tasks out.

The pipeline (see ``pipeline.py`` for the order of its stages in one place):
candidates (mutators over each model's raw SQL) -> screen (compiled SQL of the mutant and its
descendants re-run in a locked-down in-process DuckDB against the pin's built state, scored against
gold) -> confirm (real sandboxed dbt builds: mutant, true repair, wrong repairs) -> task records.
"""
