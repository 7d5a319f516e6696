"""hpcnn.optimizers."""
