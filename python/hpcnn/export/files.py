"""Writing the exported files whole or not at all: each is written under a temporary name in the
target's folder and renamed into place, so a failed export (a disk that fills, a converter that
refuses) leaves what was there before and no half-written file.

OpenVINO's IR is two files, ``NAME.xml`` (the graph) and ``NAME.bin`` (the weights), made by
OpenVINO's own converter (``openvino.convert_model``) from the ONNX file and saved by
``openvino.save_model`` with the weights kept in float32 (its default would halve them to
float16, which changes the predictions in the fourth digit)."""
from __future__ import annotations

import os
import tempfile
from typing import Any, Callable, List

from .packages import onnx_package, openvino_package


def _temporary(path: str, suffix: str) -> str:
    """A new, empty file's name beside `path` (same folder: the rename stays on one file system)."""
    folder, base = os.path.split(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=f".tmp{suffix}", dir=folder)
    os.close(fd)
    return tmp


def _remove(paths: List[str]) -> None:
    for p in paths:
        try:
            os.remove(p)
        except FileNotFoundError:
            pass


def write_onnx(proto: Any, path: str) -> None:
    """The ModelProto as the ONNX file `path`, atomically."""
    onnx = onnx_package()
    tmp = _temporary(path, ".onnx")
    try:
        onnx.save_model(proto, tmp)
        os.replace(tmp, path)
    except BaseException:
        _remove([tmp])
        raise


def write_openvino(proto: Any, xml_path: str) -> None:
    """OpenVINO IR (`xml_path` and the .bin beside it) converted by OpenVINO from the ONNX graph."""
    ov = openvino_package()
    bin_path = xml_path[:-len(".xml")] + ".bin"
    onnx_tmp = _temporary(xml_path, ".onnx")
    xml_tmp = _temporary(xml_path, ".xml")
    bin_tmp = xml_tmp[:-len(".xml")] + ".bin"
    try:
        write_onnx(proto, onnx_tmp)
        converted = _converted(ov.convert_model, onnx_tmp, xml_path)
        ov.save_model(converted, xml_tmp, compress_to_fp16=False)
        os.replace(bin_tmp, bin_path)
        os.replace(xml_tmp, xml_path)
    except BaseException:
        _remove([xml_tmp, bin_tmp])
        raise
    finally:
        _remove([onnx_tmp])


def _converted(convert: Callable[[str], Any], onnx_path: str, target: str) -> Any:
    try:
        return convert(onnx_path)
    except Exception as e:  # OpenVINO's own exception classes: said as ours, naming the target
        raise RuntimeError(f"export: OpenVINO's converter refused the ONNX graph for '{target}': {e}") from e
