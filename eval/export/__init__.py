"""Exports of tasks into other benchmarks' own layouts, so their tools run them unchanged (Spider 2.0-DBT)."""
