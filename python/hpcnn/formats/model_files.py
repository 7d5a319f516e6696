"""A model to files and weights to and from files: ``Model.save``, ``save_weights`` and
``load_weights`` (a model that exists; building a model from a file is hpcnn.saving's).

``save(path)`` writes, by the name's ending (or ``save_format``):

- ``.keras``: a Keras 3 archive (config.json, metadata.json, model.weights.h5) that
  ``keras.models.load_model`` opens, plus two members Keras does not read: ``hpcnn.json``,
  hpcnn's own description, and ``hpcnn_state.h5``, the optimizer state buffers;
- anything else (``.h5``, ``.hdf5``, ...): a legacy Keras HDF5 model file (the ``model_config`` and
  ``training_config`` attributes, the weights under ``model_weights``: what ``tf.keras`` 2 wrote and
  what Keras 2 and 3 open) plus hpcnn's description and optimizer state (hpcnn_files.py).

``save_weights(path)``: ``*.weights.h5`` in Keras 3's layout, any other name in the legacy Keras
HDF5 weights layout (tf.keras 2's ``save_weights('x.h5')``). ``load_weights`` reads both,
``.keras`` archives, hpcnn's model files and the weights files of earlier hpcnn versions
(``hpcnn_weights_json``, format ``hpcnn-weights``, and ``weight_000``, ...). Everything is written
atomically (a temporary file flushed and renamed into place).
"""
from __future__ import annotations

import json
from typing import Any, Dict, Optional

from .. import _core, distribute, validation
from ..errors import reported_as_value_errors
from .compile_config import compile_to_keras, describe
from .h5tree import H5Tree, file_kind
from .hpcnn_files import (META_DATASET, WEIGHTS_FORMAT, WEIGHTS_FORMAT_VERSION, WEIGHTS_META_DATASET, check_target,
                          description, file_path, json_bytes, optimizer_dataset, read_description, read_meta,
                          read_weights, rename_error)
from .keras_archive import Archive, write_archive
from .keras_config import model_to_keras
from .keras_objects import KERAS_VERSION
from .keras_weights import (keras3_weight_items, legacy_weight_items, legacy_weights_root, read_keras3_weights,
                            read_legacy_weights)


def save_model(model: Any, filepath: Any, overwrite: bool = True, include_optimizer: bool = True,
               save_format: Optional[str] = None) -> None:
    """``Sequential.save``: architecture, weights and compile settings in Keras' format for the
    name (``.keras``: a Keras 3 archive; anything else: a legacy Keras HDF5 model file; or
    ``save_format='h5'`` / ``'keras'``), with hpcnn's own description beside them: the step counter
    and (with ``include_optimizer``, the default) the optimizer's state (moments, step count,
    learning rate), so that fit after load_model continues exactly where this model is. Written
    atomically: a temporary file flushed to disk and renamed into place. A disk that fills up (or
    fails) is an OSError with its errno (ENOSPC, EDQUOT, EFBIG, EIO) naming the file; the file
    that was there stays as it was.

    ``overwrite=False`` refuses an existing file (FileExistsError). With a multi-process strategy
    only the chief (rank 0) writes; the other ranks return at once."""
    if not distribute.writes_files(model):
        return
    path = check_target(filepath, overwrite, "save")
    include_optimizer = validation.boolean(include_optimizer, "include_optimizer", "save")
    if save_format not in (None, "h5", "keras"):
        if save_format == "tf":
            raise NotImplementedError("save: save_format='tf' (TensorFlow's SavedModel) is not supported: save to a "
                                      "'.keras' or '.h5' file")
        raise ValueError(f"save: save_format must be 'h5', 'keras' or None, got {save_format!r}")
    archive = save_format == "keras" or (save_format is None and path.endswith(".keras"))
    model.build()
    meta, buffers = description(model, include_optimizer)
    state_items = [(f"/{optimizer_dataset(i)}", b, {}) for i, b in enumerate(buffers)]
    try:
        if archive:
            write_archive(path, model, meta, "save", state_items)
            return
        root: Dict[str, Any] = {"keras_version": KERAS_VERSION, "backend": "hpcnn"}
        root["model_config"] = json.dumps(model_to_keras(model, legacy=True))
        if model.compile_settings is not None:
            root["training_config"] = json.dumps(compile_to_keras(describe(model), legacy=True))
        items = [("/", None, root)] + legacy_weight_items(model, "/model_weights")
        items.append(("/" + META_DATASET, json_bytes(meta), {}))
        items += state_items
        _core.data.write_h5_tree(path, items, "save")
    except ValueError as e:
        raise rename_error(e, "save") from None


# ---------------------------------------------------------------------- weights files
def save_weights(model: Any, filepath: Any, overwrite: bool = True,
                 max_shard_size: Optional[float] = None) -> None:
    """``Sequential.save_weights``: ``*.weights.h5`` in Keras 3's layout (what Keras 3's
    ``load_weights`` reads), any other name in the legacy Keras HDF5 weights layout (tf.keras 2's
    ``save_weights('x.h5')``, which Keras 2 and 3 read). Written atomically (a full disk: an
    OSError, the previous file kept, as ``save``). Only the chief writes under a multi-process
    strategy."""
    if not distribute.writes_files(model):
        return
    path = check_target(filepath, overwrite, "save_weights")
    if max_shard_size is not None:
        raise NotImplementedError("save_weights: max_shard_size (sharded weights files) is not supported by hpcnn")
    if path.endswith(".keras"):
        raise ValueError(f"save_weights: '{path}' names a .keras archive, which holds a whole model: use "
                         "model.save() for it, or a name ending in '.weights.h5'")
    model.build()
    try:
        if path.endswith(".weights.h5"):
            items = keras3_weight_items(model)
        else:
            items = legacy_weight_items(model, "")
        _core.data.write_h5_tree(path, items, "save_weights")
    except ValueError as e:
        raise rename_error(e, "save_weights") from None


def load_weights(model: Any, filepath: Any, skip_mismatch: bool = False, by_name: bool = False) -> None:
    """``Sequential.load_weights``: from a Keras 3 weights file (``.weights.h5``), a legacy Keras
    HDF5 weights or model file (``.h5``: by the order of the layers that hold weights, or with
    ``by_name=True`` by layer name), a ``.keras`` archive, or an hpcnn model file; told apart by
    content. Every array is checked before anything is set (present, the model's shape, floats,
    finite): a file that does not fit is a ValueError naming the layer, and the model keeps its
    weights. ``skip_mismatch=True`` keeps the current weights of the layers that do not fit, with
    a warning for each, as Keras does."""
    path = file_path(filepath, "load_weights")
    skip_mismatch = validation.boolean(skip_mismatch, "skip_mismatch", "load_weights")
    by_name = validation.boolean(by_name, "by_name", "load_weights")
    kind = file_kind(path, "load_weights")
    model.build()
    with reported_as_value_errors("load_weights", path):
        if kind == "zip":
            if by_name:
                raise ValueError("load_weights: `by_name` only supports loading legacy '.h5' or '.hdf5' files")
            with Archive(path) as archive, archive.weights(path) as tree:
                weights = read_keras3_weights(tree, model, skip_mismatch)
        elif kind == "hdf5":
            try:
                tree = H5Tree.open(path)
            except ValueError as e:
                raise ValueError(f"load_weights: {e}") from None
            with tree:
                if legacy_weights_root(tree) is not None:
                    weights = read_legacy_weights(tree, model, by_name, skip_mismatch)
                elif tree.is_group("/layers") or tree.is_group("/_layer_checkpoint_dependencies"):
                    if by_name:
                        raise ValueError("load_weights: `by_name` only supports loading legacy '.h5' or '.hdf5' files")
                    weights = read_keras3_weights(tree, model, skip_mismatch)
                elif "/" + META_DATASET in tree.objects:  # an hpcnn model file of format_version 1 or 2
                    read_meta(tree, "load_weights")
                    weights = read_weights(tree, model)
                elif "/" + WEIGHTS_META_DATASET in tree.objects:  # an hpcnn weights file before Keras' layouts
                    read_description(tree, WEIGHTS_META_DATASET, WEIGHTS_FORMAT, WEIGHTS_FORMAT_VERSION,
                                     "load_weights", "weights")
                    weights = read_weights(tree, model)
                else:
                    raise ValueError(f"load_weights: '{path}' holds no weights hpcnn recognizes (neither Keras' "
                                     "layouts nor an hpcnn model or weights file)")
        else:
            raise ValueError(f"load_weights: '{path}' is neither an hpcnn weights file nor a Keras weights or model "
                             "file (HDF5 '.h5', or a '.keras' archive)")
    model.set_weights(weights)
