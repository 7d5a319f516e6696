"""The limits of what hpcnn's model loaders read from a ``.keras`` archive or a model config: a
contract (docs/reliability.md, "The limits"), each tested just inside and just outside
(tests/hostile/test_file_limits.py). A file past one is refused with a FileProblem naming the limit and
this module's constant, before the bytes past it are read or allocated.

The values admit real models with room: Keras' largest application configs are about 1 MB
(NASNetLarge 1.03 MB, EfficientNetB7 0.76 MB, ResNet-50 0.17 MB as ``to_json()``) and 11 levels
deep; their weights reach 1.4 GB (ConvNeXtXLarge, float32). The HDF5 listing's own bounds (objects,
attributes, a dataset's inflation) are h5tree.py's."""
from __future__ import annotations

#: The largest config JSON hpcnn parses, in bytes (a ``.keras`` archive's config.json,
#: metadata.json and hpcnn.json, an ``.h5`` file's model_config and training_config, the text
#: given to model_from_json, hpcnn's own description): 16x Keras' largest application config.
MAX_CONFIG_BYTES = 16 << 20

#: The deepest nesting of lists and objects in a config JSON. Python's JSON parser and every walk
#: over the parsed config recurse once per level: past about 1000 levels that is a RecursionError
#: in an arbitrary place (or, in C, a stack overflow). Keras' configs are about 11 deep; a model
#: nested as a layer of another adds 6 levels, so 100 admits fourteen levels of nested models.
MAX_CONFIG_DEPTH = 100

#: The largest member of a ``.keras`` archive hpcnn reads, in bytes, after inflation (members are
#: read into memory, never extracted to disk): the largest Keras application's weights (1.4 GB)
#: with room to spare.
MAX_ARCHIVE_MEMBER_BYTES = 2 << 30

#: The most members a ``.keras`` archive may list. Keras writes 3 (config.json, metadata.json,
#: model.weights.h5) plus its assets, hpcnn 5; Python's zipfile builds an object per listed
#: member when it opens an archive, so a directory of millions is refused before it is parsed.
MAX_ARCHIVE_MEMBERS = 64

#: The largest central directory (the archive's listing), in bytes, checked before zipfile parses
#: it: MAX_ARCHIVE_MEMBERS entries of at most 4 KiB each (46 bytes of header, a name, extra fields).
MAX_ARCHIVE_DIRECTORY_BYTES = MAX_ARCHIVE_MEMBERS * 4096

#: How far a compressed member may inflate, over its compressed size (plus INFLATION_SLACK_BYTES,
#: so that small, very repetitive members such as a short config pass). Weights compress barely
#: (float32 values: about 1.1-fold; Keras and hpcnn store them uncompressed), configs 10- to 20-fold;
#: a member declaring more is a zip bomb. Combined with the size of the archive file this bounds
#: what a small file can make hpcnn allocate.
MAX_MEMBER_INFLATION = 100
INFLATION_SLACK_BYTES = 1 << 20
