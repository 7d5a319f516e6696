"""A trained model leaves hpcnn for the engines that deploy it (Keras keeps this in
``keras.export``): ``model.export(path, format="onnx")`` writes an ONNX file that ONNX Runtime,
OpenVINO, TensorRT and others load, ``format="openvino"`` OpenVINO's IR (``.xml`` and ``.bin``)
through OpenVINO's own converter from that ONNX graph. docs/export.md shows loading them.

The exported graph is ``predict``'s computation (inference mode: Dropout and augmentation gone,
BatchNormalization on its moving statistics) with the model's weights, input and output
channels-last (N, H, W, C) as in Keras, any batch size. The ``onnx`` package builds it (its helper
functions) and checks it (``onnx.checker.check_model(full_check=True)``); nothing is hand-written
protobuf. Modules: onnx_graph.py (nodes, weights, layouts), onnx_layers.py (one rule per layer
class) with onnx_activations.py, onnx_model.py (the model's walk, the input signature, the
check), files.py (atomic writes, OpenVINO's conversion), packages.py (the optional packages:
``pip install onnx openvino``, hpcnn's ``export`` extra)."""
from __future__ import annotations

import os
from typing import Any, Optional

from .. import _core, distribute, validation
from ..formats.hpcnn_files import check_target
from . import files, onnx_model
from .onnx_model import DEFAULT_OPSET, exportable_layers

FORMATS = ("onnx", "openvino")
# Keras' other formats, which need TensorFlow or PyTorch underneath: what each is, for the refusal.
KERAS_ONLY_FORMATS = {
    "tf_saved_model": "TensorFlow's SavedModel", "litert": "LiteRT (TensorFlow Lite)",
    "torch": "a PyTorch ExportedProgram",
}


def export_model(model: Any, filepath: Any, format: str = "onnx", verbose: Optional[bool] = None,
                 input_signature: Any = None, opset_version: Optional[int] = None, **kwargs: Any) -> None:
    """``model.export(...)`` (Keras 3's arguments; hpcnn.models.Model.export documents them)."""
    if not isinstance(format, str) or format not in FORMATS:
        supported = " or ".join(f"format={f!r}" for f in FORMATS)
        if isinstance(format, str) and format in KERAS_ONLY_FORMATS:
            raise ValueError(f"export: format={format!r} ({KERAS_ONLY_FORMATS[format]}) needs Keras on TensorFlow or "
                             f"PyTorch; hpcnn writes {supported}, which ONNX Runtime and OpenVINO load")
        raise ValueError(f"export: Unrecognized format={format!r}. Supported formats are: {list(FORMATS)}")
    validation.no_other_arguments(kwargs, "export")
    verbose = True if verbose is None else validation.boolean(verbose, "verbose", "export")
    if opset_version is not None and format == "openvino":
        raise ValueError("export: opset_version is an argument of format='onnx' (OpenVINO's IR has no opset to choose)")
    path = check_target(os.fspath(filepath) if isinstance(filepath, os.PathLike) else filepath, True, "export")
    if format == "openvino" and not path.endswith(".xml"):
        raise ValueError(f"export: The OpenVINO export requires the filepath to end with '.xml' (the graph; the "
                         f"weights go to the '.bin' beside it). Got: filepath={path}")
    proto = onnx_model.build(model, input_signature, opset_version, _core.build_info()["version"])
    if not distribute.writes_files(model):
        return  # a multi-process strategy's other ranks: the chief writes
    if format == "onnx":
        files.write_onnx(proto, path)
        if verbose:
            print(f"Saved artifact at '{path}'.")
    else:
        files.write_openvino(proto, path)
        if verbose:
            print(f"Saved OpenVINO IR at '{path}'.")


__all__ = ["export_model", "FORMATS", "DEFAULT_OPSET", "exportable_layers"]
