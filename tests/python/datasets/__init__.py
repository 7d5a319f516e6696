"""hpcnn.datasets."""
