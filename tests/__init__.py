"""The test suite (a package, so that tests/fakegpu is `tests.fakegpu` and never shadows the
fake driver itself, the top-level package `fakegpu`)."""
