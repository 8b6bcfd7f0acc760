"""Code that runs INSIDE the sandbox: the child entry point, the DuckDB lockdown plugin, fingerprints.

This folder is bound read-only into the sandbox (at /opt/harvest) and put on the child's PYTHONPATH, so
every module here may import only the standard library, dbt and duckdb — never `harvester`.
"""
