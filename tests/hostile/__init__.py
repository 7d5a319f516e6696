"""Hostile and damaged input files: corpora and targeted refusals."""
