"""Evaluation: the scorer (official mirror, strict, explain), the tool environment, drivers, the audit."""
