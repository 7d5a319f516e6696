"""hpcnn.callbacks."""
