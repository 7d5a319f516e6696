"""The Python package hpcnn: its top-level modules here, its subpackages in the folders below."""
