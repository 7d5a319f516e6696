"""hpcnn.formats."""
