"""hpcnn.layers."""
