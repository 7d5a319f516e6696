"""Helpers shared by the tests and bench/: references, small models, workers, hostile-file corpora, op cases."""
