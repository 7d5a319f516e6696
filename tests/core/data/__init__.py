"""csrc/data: the HDF5 loader, writer, shards and shuffle plans."""
