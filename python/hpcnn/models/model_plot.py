"""``keras.utils.plot_model``: a picture of a model's graph, drawn with matplotlib.

Keras draws it with pydot and Graphviz (a system program students rarely have on a cluster);
hpcnn draws the same boxes and arrows with matplotlib, which the notebooks already use: one box
per layer (a nested model is one box unless ``expand_nested``), top to bottom (``rankdir='TB'``)
or left to right (``'LR'``), in the graph's order; an arrow from each layer to the layers that
read it, a branch that skips positions curved beside the column. The file type follows the name
(``.png``, ``.svg``, ``.pdf``, ``.jpg``), written whole or not at all.
"""
from __future__ import annotations

import os
from typing import Any, List, Optional, Tuple

from .nesting import NestedCall, keras_class_name, spans

_RANKDIRS = ("TB", "LR")


def _boxes(model: Any, expand_nested: bool) -> List[Tuple[Any, Tuple[int, ...], List[int]]]:
    """(layer or nested model, per-sample output shape, the box indices it reads) per box; box 0 is
    the input (a Sequential's too), reading nothing."""
    flat = model.layer_outputs()
    boxes: List[Tuple[Any, Tuple[int, ...], List[int]]] = [(model.layers[0] if not model.is_sequential else None,
                                                           tuple(model.input_shape[1:]), [])]
    if expand_nested:
        for (layer, parents), (_, shape, _) in zip(model.graph_nodes(), flat):
            boxes.append((layer, shape, [p + 1 for p in parents]))
    else:
        nodes = model.top_level_nodes()
        for (item, parents), (_, e) in zip(nodes, spans(nodes)):
            layer = item.model if isinstance(item, NestedCall) else item
            boxes.append((layer, flat[e - 1][1], [p + 1 for p in parents]))
    return boxes


def _label(layer: Any, shape: Tuple[int, ...], show_shapes: bool, show_dtype: bool, show_layer_names: bool,
           show_layer_activations: bool, show_trainable: bool, input_name: str) -> str:
    kind = "InputLayer" if layer is None or getattr(layer, "is_input", False) else keras_class_name(layer)
    name = input_name if layer is None else layer.name
    lines = [f"{name} ({kind})" if show_layer_names else kind]
    if show_layer_activations and getattr(layer, "activation", None):
        lines.append(f"Activation: {layer.activation}")
    if show_shapes:
        lines.append(f"Output shape: {(None,) + tuple(shape)}")
    if show_dtype:
        lines.append("Output dtype: float32")
    if show_trainable and layer is not None and not getattr(layer, "is_input", False):
        lines.append(f"Trainable: {'yes' if layer.trainable else 'no'}")
    return "\n".join(lines)


def plot_model(model: Any, to_file: str = "model.png", show_shapes: bool = False, show_dtype: bool = False,
               show_layer_names: bool = False, rankdir: str = "TB", expand_nested: bool = False, dpi: int = 200,
               show_layer_activations: bool = False, show_trainable: bool = False, **kwargs: Any) -> Any:
    """Draws the model's graph into `to_file` (Keras' ``keras.utils.plot_model``).

    Parameters
    ----------
    model : Model or Sequential
        A built model (with an input shape).
    to_file : str
        The picture's file; its extension picks the format (png, svg, pdf, jpg).
    show_shapes, show_dtype, show_layer_names, show_layer_activations, show_trainable : bool
        What each box shows besides the layer's class (Keras' options; the dtype is float32).
    rankdir : {'TB', 'LR'}
        Top to bottom, or left to right.
    expand_nested : bool
        One box per layer of a nested model instead of one for the model.
    dpi : int
        Dots per inch of a bitmap file.
    **kwargs
        Keras' ``show_layer_range`` is refused; others are refused as unknown.

    Returns
    -------
    IPython.display.Image or None
        The picture, for a notebook to show, where IPython is installed and the file is a bitmap.
    """
    if kwargs:
        raise TypeError(f"plot_model: unrecognized or unsupported arguments {sorted(kwargs)} (show_layer_range is "
                        "not supported: plot the whole model)")
    if rankdir not in _RANKDIRS:
        raise ValueError(f"plot_model: rankdir must be one of {_RANKDIRS}, got {rankdir!r}")
    if not hasattr(model, "layer_outputs"):
        raise TypeError(f"plot_model: expected an hpcnn model, got {type(model).__name__}")
    if getattr(model, "sample_shape", None) is None:
        raise ValueError(f"plot_model: model {model.name!r} is not built (no input shape yet): give it an Input, "
                         "or call build(input_shape) or fit first")
    ext = os.path.splitext(str(to_file))[1].lower().lstrip(".")
    if ext not in ("png", "svg", "pdf", "jpg", "jpeg"):
        raise ValueError(f"plot_model: to_file={to_file!r}: the extension must be .png, .svg, .pdf or .jpg")
    try:
        from matplotlib.figure import Figure   # optional (the `jupyter` extra): only this function needs it
        from matplotlib.backends.backend_agg import FigureCanvasAgg
    except ImportError:
        raise ImportError("plot_model draws with matplotlib: pip install matplotlib (the `jupyter` extra); "
                          "model.summary() prints the same layers and shapes as text") from None

    boxes = _boxes(model, bool(expand_nested))
    input_name = getattr(model.layers[0], "name", "input_layer") if not model.is_sequential else "input_layer"
    labels = [_label(layer, shape, show_shapes, show_dtype, show_layer_names, show_layer_activations,
                     show_trainable, input_name) for layer, shape, _ in boxes]
    if model.is_sequential:
        labels[0] = labels[0].replace("None (", "input_layer (")
    vertical = rankdir == "TB"
    step = 1.0
    longest = max(max(len(line) for line in label.splitlines()) for label in labels)
    width_in = max(3.0, 0.09 * longest + 1.5)
    lines = max(label.count("\n") + 1 for label in labels)
    box_in = 0.25 + 0.2 * lines
    n = len(boxes)
    size = (width_in, n * (box_in + 0.35) + 0.3) if vertical else (n * (width_in + 0.5), box_in + 2.0)
    fig = Figure(figsize=size)
    FigureCanvasAgg(fig)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_axis_off()
    if vertical:
        ax.set_xlim(-1, 1.3)
        ax.set_ylim(-(n - 1) * step - 0.5, 0.5)
        where = [(0.0, -i * step) for i in range(n)]
    else:
        ax.set_xlim(-0.5, (n - 1) * step + 0.5)
        ax.set_ylim(-1, 1.5)
        where = [(i * step, 0.0) for i in range(n)]
    style = dict(boxstyle="round,pad=0.4", facecolor="#eef3fb", edgecolor="#34495e", linewidth=1.0)
    texts = [ax.text(x, y, label, ha="center", va="center", fontsize=9, family="monospace", bbox=style)
             for (x, y), label in zip(where, labels)]
    fig.canvas.draw()   # the boxes' sizes, for the arrows of skipped positions
    to_data = ax.transData.inverted()
    extents = [to_data.transform(t.get_bbox_patch().get_window_extent()) for t in texts]
    for i, (_, _, parents) in enumerate(boxes):
        for p in parents:
            props = dict(arrowstyle="-|>", color="#34495e", lw=1.0, shrinkA=0, shrinkB=0)
            if i - p == 1:   # the next position: straight, box edge to box edge
                props.update(patchA=texts[p].get_bbox_patch(), patchB=texts[i].get_bbox_patch())
                ax.annotate("", xy=where[i], xytext=where[p], arrowprops=props)
            elif vertical:   # a skip: a bracket on the right of the column, right edge to right edge
                right = max(extents[p][1][0], extents[i][1][0])
                props.update(connectionstyle=f"bar,fraction={-0.25 / (i - p)}")
                ax.annotate("", xy=(right, where[i][1]), xytext=(right, where[p][1]), arrowprops=props)
            else:            # a skip left to right: a bracket above the row, top edge to top edge
                top = max(extents[p][1][1], extents[i][1][1])
                props.update(connectionstyle=f"bar,fraction={-0.25 / (i - p)}")
                ax.annotate("", xy=(where[i][0], top), xytext=(where[p][0], top), arrowprops=props)
    tmp = f"{to_file}.part{os.getpid()}.{ext}"
    try:
        fig.savefig(tmp, dpi=dpi, format="jpeg" if ext == "jpg" else ext)
        os.replace(tmp, to_file)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
    if ext in ("png", "jpg", "jpeg"):
        try:
            from IPython.display import Image   # optional: what a notebook cell shows
        except ImportError:
            return None
        return Image(filename=str(to_file))
    return None


__all__ = ["plot_model"]
