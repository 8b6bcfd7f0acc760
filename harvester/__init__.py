"""The harvester stage: pin real dbt repositories at exact commits, build them sandboxed, keep gold, mint tasks.

Specs, fetching (pygit2), dbt package resolution and vendoring, the sandbox, builds, gold capture,
built state and workspaces, `add`, and the mint. It stands on `core` and `mutators` only: the mint is
told where tasks go and which split a pin has (`harvester.mint.pipeline.MintTarget`), so it never
imports the corpus above it.
"""
