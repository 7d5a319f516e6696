"""The benchmarks. A script that reads the tests' tables or helpers (tests.support) runs from the
repository root as a module (python -m bench.<name>); the others also run as files (python bench/<name>.py)."""
