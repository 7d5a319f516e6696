"""``Model.summary()``: Keras' table of a model's layers, output shapes and parameter counts, its
totals, and the device it runs on."""
from __future__ import annotations

from typing import Any, List, Optional, Tuple

import numpy as np

from .. import _core
from .nesting import NestedCall, keras_class_name, spans


def print_summary(model: Any, print_fn: Any = print, line_length: Optional[int] = None) -> None:
    """A Keras-style table: layer, output shape, parameters (and, for a graph that is not a
    chain, Keras' "Connected to" column: the layers each one reads); totals; device."""
    # One row per Keras layer: a nested model is one row (Keras' " base (Sequential)"), its output
    # shape its last position's, its parameters the sum over its positions.
    flat = model.layer_outputs()
    nodes = model.top_level_nodes()
    rows = []
    for (item, _), (b, e) in zip(nodes, spans(nodes)):
        layer = item.model if isinstance(item, NestedCall) else item
        rows.append((layer, flat[e - 1][1], sum(params for _, _, params in flat[b:e])))
    labels = [f" {layer.name} ({keras_class_name(layer)})" for layer, _, _ in rows]
    if not model.is_sequential:
        labels.append(f" {model.layers[0].name} ({type(model.layers[0]).__name__})")
    # The first column fits the longest " name (Type)" label (Keras' long class names).
    c1 = max([34] + [len(label) + 2 for label in labels])
    c2 = 26
    wide = not all(parents == [i - 1] for i, (_, parents) in enumerate(nodes))  # Keras shows "Connected to" when the layers are not a chain
    line_length = max(line_length or (106 if wide else 76), c1 + c2 + (30 if wide else 12))
    sep = "_" * line_length
    print_fn(f'Model: "{model.name}"')
    print_fn(sep)
    table: List[Tuple[str, str, int, List[str]]] = []
    if not model.is_sequential:
        inp = model.layers[0]
        table.append((f" {inp.name} ({type(inp).__name__})", str(model.input_shape), 0, ["-"]))
    for (_, parents), (layer, shape, params) in zip(nodes, rows):
        sources = [f"{(model.layers[0] if p < 0 else rows[p][0]).name}[0][0]" for p in parents]
        table.append((f" {layer.name} ({keras_class_name(layer)})", str((None,) + shape), params, sources))
    if wide:
        c3 = 12
        print_fn(f"{' Layer (type)':<{c1}}{'Output Shape':<{c2}}{'Param #':<{c3}}Connected to")
        print_fn("=" * line_length)
        for label, shape, params, sources in table:
            print_fn(f"{label:<{c1}}{shape:<{c2}}{params:<{c3},}{sources[0] if sources else ''}".rstrip())
            for src in sources[1:]:
                print_fn(" " * (c1 + c2 + c3) + src)
    else:
        print_fn(f"{' Layer (type)':<{c1}}{'Output Shape':<{c2}}Param #")
        print_fn("=" * line_length)
        for label, shape, params, _ in table:
            print_fn(f"{label:<{c1}}{shape:<{c2}}{params:,}")
    print_fn("=" * line_length)
    total = model.count_params()
    # Non-trainable: the weights of frozen layers, and the non-trainable weights by nature
    # (BatchNormalization's moving statistics) of every layer, as the core reports them.
    per_layer = zip(model.trainable_mask(), model.core.layer_weights)
    trainable = sum(int(np.prod(shape)) for on, weights in per_layer if on for _, shape, kind in weights if kind)
    print_fn(f"Total params: {total:,} ({total * 4 / 1024**2:.2f} MB)")
    print_fn(f"Trainable params: {trainable:,} ({trainable * 4 / 1024**2:.2f} MB)")
    print_fn(f"Non-trainable params: {total - trainable:,} ({(total - trainable) * 4 / 1024**2:.2f} MB)")
    if model.trainable_changed_since_compile():
        print_fn("Note: `trainable` was changed after compile(); call compile() again for fit to use it")
    dev = model.device
    if dev == "cpu":
        info = _core.build_info()
        where = f"cpu ({_core.get_num_threads()} threads, {info['blas_vendor']})"
    else:
        idx = int(dev.split(":")[1])
        gpus = {d.index: d for d in _core.cuda_devices(with_free_memory=False)}
        name = gpus[idx].name if idx in gpus else "?"
        tf32 = getattr(_core, "cuda_get_tf32", None)
        where = f"{dev} ({name}" + (f", TF32 {'on' if tf32() else 'off'}" if tf32 else "") + ")"
    print_fn(f"Device: {where}")
    if model.compile_settings:
        print_fn(f"Optimizer: {model.optimizer!r}; loss: {loss_text(model.compile_settings)}")
    print_fn(sep)


def loss_text(settings) -> str:
    """The compiled loss with the settings that change what it computes: 'categorical_crossentropy
    (from_logits=True, label_smoothing=0.1)'. Without from_logits the reader of a summary cannot tell
    whether the model's last layer is meant to output probabilities or logits."""
    given = [f"from_logits={bool(settings.get('from_logits'))}"] if settings.get("from_logits") else []
    if settings.get("label_smoothing"):
        given.append(f"label_smoothing={settings['label_smoothing']:g}")
    return settings["loss"] + (f" ({', '.join(given)})" if given else "")
