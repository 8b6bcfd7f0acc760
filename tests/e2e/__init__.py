"""The acceptance tests of the used-by chain (a package, so test_chain.py may share its name with tests/corpora/test_chain.py)."""
