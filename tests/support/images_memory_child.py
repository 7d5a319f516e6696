"""Converts a folder of images with small blocks and prints the peak memory it added (kB), for
tests/system/test_convert_images.py: `python -m tests.support.images_memory_child DIR OUT SIZE`."""
import resource
import sys

from hpcnn.image_folders import cache, decode, listing
from hpcnn.image_folders.folder import listed_subsets


def main() -> None:
    directory, out, size = sys.argv[1], sys.argv[2], int(sys.argv[3])
    cache.BLOCK = 16  # small blocks: the bound shows with few files
    found = listing.index_directory(directory, "inferred", None, False, 0, False, False)
    parts = listed_subsets(found, None)
    recipe = decode.Recipe((size, size), 3, "bilinear", None)
    cache.write_images(out + ".warm", parts[:1], decode.Recipe((8, 8), 3, "bilinear", None), found.class_names,
                       workers=2)  # imports, threads and HDF5 warmed up before the baseline
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    cache.write_images(out, parts, recipe, found.class_names, workers=2)
    after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(after - before)


if __name__ == "__main__":
    main()
