"""Evaluation: the tool environment an agent repairs a task in, its drivers, the failure ladder, the audit."""
