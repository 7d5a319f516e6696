#!/usr/bin/env python3
"""How far ONNX Runtime's and OpenVINO's outputs of an exported model are from hpcnn's predict
(issue 39): every model the export tests use (tests/support/export_models.py: the applications,
their logits, a model with every layer rule, nested models, augmentation) and the models Keras
saved (tests/data/keras), at batch 1 and 64 on random N(0, 1) images. Prints a Markdown table: per
model the largest output magnitude, and for each engine the largest absolute difference, that
difference relative to the largest output magnitude, and the largest difference relative to the
element itself over the elements at least 1 % of the largest (tests/support/export_engines.py).
Needs hpcnn's export extra (onnx, onnxruntime, openvino).

    python -m bench.export_differences            (from the repository root)
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np

import onnxruntime
import openvino
from tests.support import export_models
from tests.support.export_engines import differences, images, onnxruntime_predict, openvino_predict


def main() -> None:
    print(f"# onnxruntime {onnxruntime.__version__}, openvino {openvino.__version__}; batch 1 and 64, the worst of both")
    print("| model | max abs output | ONNX Runtime: abs / rel. to max / rel. per element | OpenVINO: same |")
    print("|---|---|---|---|")
    with tempfile.TemporaryDirectory() as tmp:
        onnx_path, xml_path = Path(tmp) / "m.onnx", Path(tmp) / "m.xml"
        for name in sorted(export_models.MODELS) + export_models.KERAS_FILES:
            model = export_models.MODELS[name]() if name in export_models.MODELS else export_models.keras_file(name)
            model.export(onnx_path, verbose=False)
            model.export(xml_path, format="openvino", verbose=False)
            ort, ov, scale = [], [], 0.0
            for batch in (1, 64):
                x = images(model.sample_shape, batch, seed=batch)
                want = model.predict(x, batch_size=64)
                scale = max(scale, float(np.abs(want).max()))
                ort.append(differences(onnxruntime_predict(onnx_path, x), want))
                ov.append(differences(openvino_predict(xml_path, x), want))
            cells = [" / ".join(f"{max(d[i] for d in engine):.1e}" for i in range(3)) for engine in (ort, ov)]
            print(f"| {name} | {scale:.3g} | {cells[0]} | {cells[1]} |", flush=True)


if __name__ == "__main__":
    main()
