"""Distinguishing data (augmentation): seed rows that let a pin's data tell an invisible mutant from the
original. ``derive`` is pure (conditions and rows); ``run`` builds, checks and mints augmented pins."""
