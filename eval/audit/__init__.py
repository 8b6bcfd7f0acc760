"""The transfer audit: a driver over a split, episodes in parallel and resumable, a report of k/N and the ladder.

runner.py plays the episodes, rundir.py keeps the run folder, report.py aggregates it (Markdown, JSON,
PNG), sealed.py is the test split's one reader (unseal for a frozen recipe, record the result once).
"""
