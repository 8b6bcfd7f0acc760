"""The test suite, a package so that test folders named like layers (tests/eval) never shadow them."""
