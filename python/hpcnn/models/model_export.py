"""``Model.export`` (mixed into ``Model``): the model as an artifact for inference engines, ONNX or
OpenVINO IR; the work is hpcnn.export's."""
from __future__ import annotations

from typing import Any, Optional

from ..export import export_model


class ModelExport:
    """Keras' ``export`` for ``Model`` and ``Sequential``."""

    def export(self, filepath: Any, format: str = "onnx", verbose: Optional[bool] = None, input_signature: Any = None,
               opset_version: Optional[int] = None, **kwargs: Any) -> None:
        """Export the model for inference (Keras 3's ``model.export``): ``predict``'s computation
        with the current weights, as a file an inference engine loads without hpcnn
        (docs/export.md shows loading it in ONNX Runtime and OpenVINO).

        The graph's input is the model's, channels-last (N, H, W, C) float32, named as the
        model's Input (``model.inputs[0].name``); its output is named ``"output_0"``. Dropout and
        the augmentation layers are gone (RandomCrop takes the centre, as ``predict``). A layer
        hpcnn cannot write (a subclass of one of its layers, say) is a NotImplementedError naming
        the layer and its class, before anything is written. Needs the ``onnx`` package (and
        ``openvino`` for its format): hpcnn's ``export`` extra. The file is written whole or not
        at all (a temporary file renamed into place).

        Parameters
        ----------
        filepath : str or path
            The file to write.
        format : str
            ``"onnx"`` (the default here: Keras' default, ``"tf_saved_model"``, needs TensorFlow)
            writes an ONNX file (ONNX Runtime, OpenVINO, TensorRT, ...); ``"openvino"`` writes
            OpenVINO's IR, ``filepath`` ending in ``.xml`` and the weights in the ``.bin`` beside
            it, converted by OpenVINO from the ONNX graph. Keras' other formats
            (``"tf_saved_model"``, ``"litert"``, ``"torch"``) are a ValueError.
        verbose : bool, optional
            Print where the file went (None: yes, as in Keras).
        input_signature : spec, optional
            The input's spec (``keras.InputSpec``, an ``hpcnn.Input()`` tensor, ``tf.TensorSpec``,
            an array; alone or in a list of one): its name names the graph's input, its batch
            dimension None (any batch size) or a fixed size; the per-sample shape must be the
            model's. Default: the model's input, any batch size.
        opset_version : int, optional
            The ONNX opset (default 18, as PyTorch's exporter writes; 13 and later).
        """
        export_model(self, filepath, format, verbose, input_signature, opset_version, **kwargs)
