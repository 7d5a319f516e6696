"""The optional packages an export uses: ``onnx`` (to build and check the graph) and ``openvino``
(its converter, for ``format="openvino"``). hpcnn imports and trains without them, so they are
imported when an export runs; a missing one is an ImportError saying what to install."""
from __future__ import annotations

import importlib
from types import ModuleType

INSTALL_HINT = ("install hpcnn's export extra (in the clone: pip install --no-build-isolation \".[export]\") or the "
                "package alone (pip install {package})")


def _load(package: str, purpose: str) -> ModuleType:
    try:
        return importlib.import_module(package)
    except ImportError as e:
        raise ImportError(f"{purpose} needs the {package!r} package, which is not importable here ({e}): "
                          + INSTALL_HINT.format(package=package)) from None


def onnx_package() -> ModuleType:
    """``onnx`` with the submodules export uses (helper, numpy_helper, checker) loaded."""
    onnx = _load("onnx", "export to ONNX")
    for sub in ("helper", "numpy_helper", "checker"):
        importlib.import_module(f"onnx.{sub}")
    return onnx


def openvino_package() -> ModuleType:
    """``openvino`` (its ``convert_model`` and ``save_model``)."""
    return _load("openvino", "export to OpenVINO IR (format='openvino')")
