"""``hpcnn export MODEL OUT``: a saved model as an ONNX file or OpenVINO IR, from the command line.

    hpcnn export model.keras model.onnx                  (ONNX: ONNX Runtime, OpenVINO, TensorRT, ...)
    hpcnn export model.h5 model.xml                      (OpenVINO IR: model.xml and model.bin)
    hpcnn export model.keras out.xml --format openvino   (the format said; else told by OUT's suffix)
    hpcnn export model.keras model.onnx --opset 21

MODEL is any file ``hpcnn.models.load_model`` reads: saved by hpcnn, or by Keras (``.keras``,
legacy ``.h5``), so a Keras model becomes an ONNX file without TensorFlow or PyTorch. The graph is
``predict``'s computation, its input channels-last (N, H, W, C) as in Keras, any batch size
(``Model.export``; docs/export.md shows loading it). Needs hpcnn's ``export`` extra (onnx, and
openvino for its format)."""
from __future__ import annotations

import argparse
from typing import Any

from . import saving
from .export import DEFAULT_OPSET, FORMATS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = __doc__
    p.formatter_class = argparse.RawDescriptionHelpFormatter
    p.add_argument("model", help="the saved model (.keras, .h5: hpcnn's or Keras')")
    p.add_argument("out", help="the file to write: .onnx (ONNX) or .xml (OpenVINO IR, with the .bin beside it)")
    p.add_argument("--format", choices=FORMATS, default=None,
                   help="onnx or openvino (default: openvino for an OUT ending in .xml, else onnx)")
    p.add_argument("--opset", type=int, default=None, help=f"the ONNX opset (default {DEFAULT_OPSET}; 13 and later)")


def main(a: Any) -> int:
    fmt = a.format or ("openvino" if str(a.out).endswith(".xml") else "onnx")
    model = saving.load_model(a.model, compile=False)
    model.export(a.out, format=fmt, verbose=True, opset_version=a.opset)
    return 0
