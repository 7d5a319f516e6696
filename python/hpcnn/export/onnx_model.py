"""An hpcnn model as an ONNX ModelProto: the input signature, the walk over the model's positions
(nested models expanded: ``model.graph_nodes()``), each layer's rule (onnx_layers.py) with its
weights read through the model's public weight access, and the ONNX checker's full check.

The input is Keras' input: channels-last (N, H, W, C), named as the model's Input
(``model.inputs[0].name``; Keras' 'input_layer' for an unnamed one), float32 (uint8 where the Input says
so: the graph casts it), the batch dimension the symbol 'batch' (any size) unless
``input_signature`` fixes it. The output is channels-last too, named 'output_0' (the name Keras'
TensorFlow-backend export gives a model's one output)."""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import numpy as np

from .. import validation
from .onnx_activations import NAMES as ACTIVATION_NAMES
from .onnx_graph import OnnxGraph, Value
from .onnx_layers import RULES
from .packages import onnx_package

OUTPUT_NAME = "output_0"
DEFAULT_OPSET = 18  # what PyTorch's exporter (Keras' torch backend) writes by default; ONNX Runtime and OpenVINO read it
MIN_OPSET = 13      # Softmax over any one axis


class Signature(NamedTuple):
    """The exported input: its name, batch size (None: any), per-sample shape and dtype."""
    name: str
    batch: Optional[int]
    shape: Tuple[int, ...]
    dtype: str


def exportable_layers() -> List[str]:
    """The class names export writes, for messages and docs."""
    return sorted({cls.__name__ for cls in RULES})


def check_exportable(model: Any) -> None:
    """NotImplementedError naming the first layer hpcnn cannot write to ONNX, and its class."""
    for layer, _ in model.graph_nodes():
        if type(layer) not in RULES:
            raise NotImplementedError(
                f"export: layer '{layer.name}' ({type(layer).__name__}) cannot be exported to ONNX: hpcnn exports its "
                f"own layers ({', '.join(exportable_layers())}), not subclasses or other classes")
        if getattr(layer, "activation", "linear") not in ACTIVATION_NAMES:
            raise NotImplementedError(f"export: layer '{layer.name}' ({type(layer).__name__}): activation "
                                      f"{layer.activation!r} cannot be exported to ONNX")


def opset(opset_version: Any) -> int:
    """The opset to write: ``opset_version`` (None: DEFAULT_OPSET), checked against what the
    installed onnx package knows."""
    onnx = onnx_package()
    newest = int(onnx.defs.onnx_opset_version())
    if opset_version is None:
        return min(DEFAULT_OPSET, newest)
    return validation.integer(opset_version, "opset_version", "export", minimum=MIN_OPSET, maximum=newest)


def signature(model: Any, input_signature: Any) -> Signature:
    """The input as the model gives it, or as ``input_signature`` (Keras' argument: a spec with
    ``shape``, and optionally ``dtype`` and ``name``, such as ``keras.InputSpec``,
    ``hpcnn.Input(...)``'s tensor, ``tf.TensorSpec`` or an array; alone or in a list of one) says,
    whose per-sample shape must be the model's (its batch dimension None or a size)."""
    sample = model.sample_shape
    if sample is None:
        raise ValueError("export: the model has no input shape yet, so there is nothing to export: start it with "
                         "an Input / InputLayer, or build it (model.build(input_shape))")
    tensor = model.inputs[0]
    # An InputLayer a Sequential was started with keeps no name of its own: Keras' default name then.
    name = tensor.layer.name or tensor.layer.name_prefix
    default = Signature(name, None, tuple(sample), tensor.dtype)
    if input_signature is None:
        return default
    spec = input_signature
    while isinstance(spec, (list, tuple)) and len(spec) == 1 and not _is_shape(spec):
        spec = spec[0]
    if isinstance(spec, (list, tuple, dict)):
        raise ValueError(f"export: input_signature must describe the model's one input, got {input_signature!r:.200}")
    if not hasattr(spec, "shape"):
        raise TypeError(f"export: input_signature must be a spec with a shape (keras.InputSpec, an hpcnn or Keras "
                        f"tensor, tf.TensorSpec or an array), got {type(spec).__name__}")
    shape = [None if d is None else int(d) for d in spec.shape]
    if isinstance(spec, np.ndarray) and shape:
        shape[0] = None  # an array stands for its kind of batch, as in Keras
    if tuple(shape[1:]) != tuple(sample) or not shape:
        raise ValueError(f"export: input_signature's shape {tuple(shape)} does not fit the model's input "
                         f"{(None, *sample)}: hpcnn exports the model's per-sample shape, with any batch size (None) "
                         "or a fixed one")
    batch = shape[0]
    if batch is not None and batch <= 0:
        raise ValueError(f"export: input_signature's batch size must be None or positive, got {batch}")
    dtype = getattr(spec, "dtype", None)
    dtype = default.dtype if dtype is None else str(getattr(dtype, "name", dtype))
    if dtype not in ("float32", "uint8"):
        raise ValueError(f"export: input_signature's dtype must be float32 or uint8, got {dtype!r}")
    name = getattr(spec, "name", None)
    return Signature(name if isinstance(name, str) and name else default.name, batch, default.shape, dtype)


def _is_shape(value: Any) -> bool:
    return all(d is None or isinstance(d, (int, np.integer)) for d in value)


def layer_weights(model: Any) -> List[Dict[str, np.ndarray]]:
    """Per position of the model, its weights by Keras' names, from ``get_weights()`` (the
    model's public weight access, in its order) and the core's per-layer weight names."""
    arrays = model.get_weights()
    out, k = [], 0
    for weights in model.core.layer_weights:
        names = [name for name, _, _ in weights]
        out.append(dict(zip(names, arrays[k:k + len(names)])))
        k += len(names)
    return out


def build(model: Any, input_signature: Any = None, opset_version: Any = None, producer_version: str = "") -> Any:
    """The ONNX ModelProto of ``model`` in inference mode (``predict``'s computation), checked by
    ``onnx.checker.check_model(full_check=True)``."""
    sig = signature(model, input_signature)
    check_exportable(model)  # what hpcnn refuses is said with or without the onnx package
    onnx = onnx_package()
    version = opset(opset_version)
    nodes = model.graph_nodes()
    shapes = [tuple(int(d) for d in s) for s in model.core.layer_output_shapes]
    weights = layer_weights(model)
    g = OnnxGraph(version)
    g.unique(sig.name)
    x = Value(sig.name, sig.shape, "nhwc" if len(sig.shape) == 3 else "plain")
    if sig.dtype != "float32":
        x = Value(g.op("Cast", [x.name], f"{sig.name}/Cast", to=onnx.TensorProto.FLOAT), x.shape, x.layout)
    values: List[Value] = []
    for (layer, parents), shape, w in zip(nodes, shapes, weights):
        ins = [x if p < 0 else values[p] for p in parents]
        values.append(RULES[type(layer)](g, layer, ins, shape, w))
    out = g.channels_last(values[-1])
    g.rename_output(out, OUTPUT_NAME)
    proto = g.model(model.name, [g.tensor_info(sig.name, sig.dtype, sig.batch, sig.shape)],
                    [g.tensor_info(OUTPUT_NAME, "float32", sig.batch, out.shape)], producer_version,
                    doc=f"hpcnn model '{model.name}': input {sig.name} (N, {', '.join(map(str, sig.shape))}) "
                        "channels-last as in Keras")
    onnx.checker.check_model(proto, full_check=True)
    return proto
