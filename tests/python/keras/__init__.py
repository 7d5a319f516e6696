"""hpcnn.keras."""
