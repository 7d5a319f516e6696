"""The ONNX graph being written: its nodes, its weights (initializers) and the layout of each value.

Keras' images are channels-last, (N, H, W, C), and so are the exported model's input and output.
ONNX's Conv, pooling and BatchNormalization are channels-first, (N, C, H, W). Each value of the
graph records which of the two it is in (``Value.layout``: "nhwc" or "nchw"; "plain" for what is
not an image, such as Dense's rows or Flatten's output). An operator asks for the layout it needs
(``channels_first`` / ``channels_last``) and gets the value transposed once, the transposed value
cached: a stack of convolutions then runs channels-first between one Transpose after the input and
one before the Flatten (which must read (H, W, C) order, as Keras flattens) or the output.
Elementwise operators, Add and Concatenate work in whatever layout their first input has.

Every node is made by the ``onnx`` package's helpers (``onnx.helper``, ``onnx.numpy_helper``); the
nodes and values are named after the Keras layer that made them ('conv2d/Conv'), so an engine's
per-node profile reads by layer.
"""
from __future__ import annotations

from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

import numpy as np

from .packages import onnx_package

# Keras' axes of an image (N, H, W, C) -> the same axes of its channels-first form (N, C, H, W).
_NCHW_AXIS = {0: 0, 1: 2, 2: 3, 3: 1}
_TO_NCHW = [0, 3, 1, 2]
_TO_NHWC = [0, 2, 3, 1]


class Value(NamedTuple):
    """A tensor of the graph: its name, its per-sample shape in Keras' (channels-last) order, and the
    layout it is stored in ("nhwc", "nchw" or "plain")."""
    name: str
    shape: Tuple[int, ...]
    layout: str

    @property
    def is_image(self) -> bool:
        return len(self.shape) == 3

    def axis(self, keras_axis: int) -> int:
        """The ONNX axis of Keras' axis ``keras_axis`` (the batch axis 0 counted; -1 the last)."""
        k = keras_axis % (len(self.shape) + 1)
        return _NCHW_AXIS[k] if self.layout == "nchw" else k

    @property
    def channel_axis(self) -> int:
        """Where the channels (Keras' last axis) are: 1 channels-first, else the last axis."""
        return self.axis(-1)


class OnnxGraph:
    """Nodes and initializers in the order they are made, with unique names."""

    def __init__(self, opset: int) -> None:
        self.onnx = onnx_package()
        self.opset = opset
        self.nodes: List[Any] = []  # onnx.NodeProto
        self.initializers: List[Any] = []  # onnx.TensorProto
        self._taken: set = set()
        self._converted: Dict[Tuple[str, str], Value] = {}

    def unique(self, base: str) -> str:
        name, k = base, 1
        while name in self._taken:
            name = f"{base}_{k}"
            k += 1
        self._taken.add(name)
        return name

    def weight(self, name: str, array: np.ndarray) -> str:
        """A float32 initializer (a weight, or a constant of the layer ``name`` belongs to)."""
        unique = self.unique(name)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.ascontiguousarray(array, dtype=np.float32), unique))
        return unique

    def ints(self, name: str, values: Sequence[int]) -> str:
        """An int64 initializer (pads, slice bounds, axes)."""
        unique = self.unique(name)
        self.initializers.append(self.onnx.numpy_helper.from_array(np.asarray(list(values), dtype=np.int64), unique))
        return unique

    def op(self, op_type: str, inputs: Sequence[str], name: str, **attributes: Any) -> str:
        """One node; returns its output's name (the node's name too)."""
        out = self.unique(name)
        self.nodes.append(self.onnx.helper.make_node(op_type, list(inputs), [out], name=out, **attributes))
        return out

    # ------------------------------------------------------------------ layouts
    def as_layout(self, v: Value, layout: str) -> Value:
        """`v` in `layout` ("nchw" or "nhwc"; a value that is not an image is returned as it is)."""
        if not v.is_image or v.layout == layout:
            return v
        key = (v.name, layout)
        if key not in self._converted:
            perm = _TO_NCHW if layout == "nchw" else _TO_NHWC
            name = self.op("Transpose", [v.name], f"{v.name}/to_{layout}", perm=perm)
            self._converted[key] = Value(name, v.shape, layout)
        return self._converted[key]

    def channels_first(self, v: Value) -> Value:
        return self.as_layout(v, "nchw")

    def channels_last(self, v: Value) -> Value:
        return self.as_layout(v, "nhwc")

    def rename_output(self, v: Value, name: str) -> None:
        """Gives the value `v` (the graph's output) the name `name`: the node making it is renamed
        when nothing else reads it under its old name, else an Identity node is added."""
        producer = next((n for n in self.nodes if v.name in n.output), None)
        read = any(v.name in n.input for n in self.nodes)
        if producer is not None and not read and name not in self._taken:
            producer.output[list(producer.output).index(v.name)] = name
            self._taken.add(name)
            return
        if name in self._taken:
            raise ValueError(f"export: the output name {name!r} is already the name of a value of the graph")
        self._taken.add(name)
        self.nodes.append(self.onnx.helper.make_node("Identity", [v.name], [name], name=name))

    def model(self, graph_name: str, inputs: List[Any], outputs: List[Any], producer_version: str,
              doc: Optional[str] = None) -> Any:
        """The ModelProto, in the oldest IR version that holds this opset (engines refuse IR
        versions newer than they know)."""
        helper = self.onnx.helper
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, self.initializers)
        opsets = [helper.make_opsetid("", self.opset)]
        model = helper.make_model(graph, opset_imports=opsets, producer_name="hpcnn",
                                  producer_version=producer_version,
                                  ir_version=helper.find_min_ir_version_for(opsets))
        if doc:
            model.doc_string = doc
        return model


    def tensor_info(self, name: str, elem_type: str, batch: Optional[int], sample_shape: Sequence[int]) -> Any:
        """A graph input's or output's description (onnx.ValueInfoProto), ``elem_type`` 'float32' or
        'uint8': the batch dimension a fixed size or the symbol 'batch' (any size)."""
        code = {"float32": self.onnx.TensorProto.FLOAT, "uint8": self.onnx.TensorProto.UINT8}[elem_type]
        return self.onnx.helper.make_tensor_value_info(name, code, [batch if batch is not None else "batch",
                                                                    *sample_shape])
