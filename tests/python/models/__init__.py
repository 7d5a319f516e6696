"""hpcnn.models."""
