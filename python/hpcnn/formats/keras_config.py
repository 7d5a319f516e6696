"""Model configs in Keras' shapes, both ways: hpcnn's ``get_config()`` to Keras 3's serialized
config (``.keras`` archives, ``to_json``) or Keras 2's legacy config (``.h5`` files), and either
Keras shape back to hpcnn's config (hpcnn.saving builds the model from it).

hpcnn's layers take Keras' argument names, so a layer's config moves nearly as it is. What this
module adds on the way to Keras: the arguments hpcnn leaves at Keras' defaults (initializers,
``data_format``, constraints, ...), dtype policies, Keras' wrapping (``module``,
``registered_name``, ``build_config``). On the way back: it accepts both Keras shapes (Keras 3's
``batch_shape`` and DTypePolicy, Keras 2's ``batch_input_shape`` and dtype strings), drops what
has no effect on the computation hpcnn does (dtype policies: hpcnn computes in float32;
initializers when weights follow from a file), and refuses, naming the layer, anything hpcnn
would otherwise compute differently. A model that uses layer classes hpcnn lacks is refused with
the list of those classes before anything is built.
"""
from __future__ import annotations

import copy
import json
import re
from typing import Any, Dict, List, Optional, Sequence, Tuple

from ..errors import UnsupportedConfig
from ..layers import LAYER_CLASSES
from .compile_config import compile_to_keras, describe
from .keras_objects import plain, policy, wrap

_FLOAT_POLICIES = ("float32", "float64", "float16", "bfloat16", "mixed_float16", "mixed_bfloat16")
# Keras class names that mean the same layer as another name.
_CLASS_ALIASES = {"Convolution2D": "Conv2D", "SeparableConvolution2D": "SeparableConv2D", "MaxPool2D": "MaxPooling2D", "AvgPool2D": "AveragePooling2D",
                  "GlobalAvgPool2D": "GlobalAveragePooling2D", "GlobalMaxPool2D": "GlobalMaxPooling2D"}
# Keras arguments that change nothing at these values and that hpcnn's layers do not take.
_NO_EFFECT = {"quantization_config": None, "lora_rank": None, "lora_alpha": None, "sparse": False,
              "ragged": False, "optional": False, "input_tensor": None}
_MODEL_CLASSES = ("Sequential", "Functional", "Model")
# Keras 3 layers without a build() of their own: built when constructed, so their configs carry no
# build_config.
_BUILT_AT_INIT = ("Dropout", "MaxPooling2D", "AveragePooling2D", "GlobalAveragePooling2D", "GlobalMaxPooling2D",
                  "Activation", "ReLU", "LeakyReLU", "ELU", "Softmax", "Reshape")


def _initializer(name: str, legacy: bool) -> Dict[str, Any]:
    if name == "glorot_uniform":
        cfg: Dict[str, Any] = {"seed": None} if legacy else {"seed": None, "input_axes": None, "output_axes": None}
        return wrap("keras.initializers", "GlorotUniform", cfg, legacy)
    if name == "ones":
        return wrap("keras.initializers", "Ones", {}, legacy)
    return wrap("keras.initializers", "Zeros", {}, legacy)


def _regularizer(value: Any, legacy: bool) -> Any:
    if value is None:
        return None
    return wrap("keras.regularizers", value["class_name"], dict(value.get("config", {})), legacy)


def _layer_to_keras(class_name: str, cfg: Dict[str, Any], legacy: bool) -> Dict[str, Any]:
    """One hpcnn layer config (get_config) as the Keras layer config of the same class."""
    cfg = dict(cfg)
    cfg.pop("input_shape", None)  # the model's InputLayer carries it
    out: Dict[str, Any] = {"name": cfg.pop("name"), "trainable": cfg.pop("trainable", True), "dtype": policy(legacy)}
    if class_name == "Conv2D":
        out.update(filters=cfg.pop("filters"), kernel_size=cfg.pop("kernel_size"), strides=cfg.pop("strides", [1, 1]),
                   padding=cfg.pop("padding", "valid"), data_format="channels_last", dilation_rate=[1, 1], groups=1,
                   activation=cfg.pop("activation", "linear"), use_bias=cfg.pop("use_bias", True))
    elif class_name in ("DepthwiseConv2D", "SeparableConv2D"):
        if class_name == "SeparableConv2D":
            out.update(filters=cfg.pop("filters"))
        out.update(kernel_size=cfg.pop("kernel_size"), strides=cfg.pop("strides", [1, 1]),
                   padding=cfg.pop("padding", "valid"), depth_multiplier=cfg.pop("depth_multiplier", 1),
                   data_format="channels_last", dilation_rate=cfg.pop("dilation_rate", [1, 1]),
                   activation=cfg.pop("activation", "linear"), use_bias=cfg.pop("use_bias", True),
                   bias_initializer=_initializer("zeros", legacy), bias_regularizer=None, activity_regularizer=None,
                   bias_constraint=None)
        kernels = ("depthwise",) if class_name == "DepthwiseConv2D" else ("depthwise", "pointwise")
        for k in kernels:
            out.update({f"{k}_initializer": _initializer("glorot_uniform", legacy), f"{k}_regularizer": None,
                        f"{k}_constraint": None})
    elif class_name == "Dense":
        out.update(units=cfg.pop("units"), activation=cfg.pop("activation", "linear"), use_bias=cfg.pop("use_bias", True))
    elif class_name in ("MaxPooling2D", "AveragePooling2D"):
        out.update(pool_size=cfg.pop("pool_size"), padding=cfg.pop("padding", "valid"),
                   strides=cfg.pop("strides", None), data_format="channels_last")
    elif class_name == "Flatten":
        out.update(data_format="channels_last")
    elif class_name == "Dropout":
        out.update(rate=cfg.pop("rate"), noise_shape=cfg.pop("noise_shape", None), seed=None)
    elif class_name == "ReLU":
        out.update(max_value=None, negative_slope=0.0, threshold=0.0)
    elif class_name == "BatchNormalization":
        out.update(axis=cfg.pop("axis", -1), momentum=cfg.pop("momentum", 0.99), epsilon=cfg.pop("epsilon", 1e-3),
                   center=cfg.pop("center", True), scale=cfg.pop("scale", True),
                   beta_initializer=_initializer("zeros", legacy), gamma_initializer=_initializer("ones", legacy),
                   moving_mean_initializer=_initializer("zeros", legacy),
                   moving_variance_initializer=_initializer("ones", legacy), beta_regularizer=None,
                   gamma_regularizer=None, beta_constraint=None, gamma_constraint=None)
        if not legacy:  # (Keras 3.15's renorm arguments are left out: older Keras 3 versions do not take them)
            out.update(synchronized=False)
    elif class_name in ("GlobalAveragePooling2D", "GlobalMaxPooling2D"):
        out.update(data_format="channels_last", keepdims=cfg.pop("keepdims", False))
    elif class_name == "Normalization":
        out.update(axis=cfg.pop("axis", [-1]), invert=cfg.pop("invert", False), mean=cfg.pop("mean", None),
                   variance=cfg.pop("variance", None))
    elif class_name == "ZeroPadding2D":
        out.update(padding=cfg.pop("padding"), data_format="channels_last")
    elif class_name == "LeakyReLU" and legacy:
        out.update(alpha=cfg.pop("negative_slope"))  # Keras 2's name; Keras 3 takes it too
    if class_name in ("Conv2D", "Dense"):
        out.update(kernel_initializer=_initializer("glorot_uniform", legacy), bias_initializer=_initializer("zeros", legacy),
                   kernel_regularizer=_regularizer(cfg.pop("kernel_regularizer", None), legacy),
                   bias_regularizer=_regularizer(cfg.pop("bias_regularizer", None), legacy),
                   activity_regularizer=None, kernel_constraint=None, bias_constraint=None)
    for key, value in cfg.items():  # a layer class this module has no template for: its own Keras arguments
        out[key] = _regularizer(value, legacy) if key.endswith("_regularizer") else value
    return out


def _input_layer(shape: Sequence[int], legacy: bool, name: str = "input_layer") -> Dict[str, Any]:
    batch = [None] + list(shape)
    if legacy:
        return wrap("keras.layers", "InputLayer", {"batch_input_shape": batch, "dtype": "float32", "sparse": False,
                                                    "ragged": False, "name": name}, legacy)
    return wrap("keras.layers", "InputLayer", {"batch_shape": batch, "dtype": "float32", "sparse": False,
                                                "ragged": False, "name": name, "optional": False}, legacy)


def model_to_keras(model: Any, legacy: bool = False, include_compile: bool = True,
                   nested: bool = False) -> Dict[str, Any]:
    """The model's config as Keras serializes it: Keras 3's shape (``.keras``, ``to_json``), or
    with ``legacy`` Keras 2's (the ``model_config`` attribute of ``.h5`` files, which both Keras 2
    and Keras 3 read). ``nested``: the config of a model nested as a layer of another."""
    if not model.is_sequential:
        return _functional_to_keras(model, legacy, include_compile, nested)
    cfg = model.get_config()
    input_shape = list(model.input_shape[1:]) if model.sample_shape is not None else None
    layers: List[Dict[str, Any]] = []
    shapes = {}
    if model.built:  # each layer's input shape, for Keras 3's build_config
        cur: Tuple[Any, ...] = tuple(input_shape or ())
        flat = model.layer_outputs()
        for layer, _, end in model.top_level_spans():
            shapes[layer.name] = [None] + list(cur)
            cur = flat[end - 1][1]
    nested = {layer.name: layer for layer in model.layers if _is_model(layer)}
    for entry in cfg["layers"]:
        cls, lcfg = entry["class_name"], entry["config"]
        if cls == "InputLayer":
            layers.append(_input_layer(lcfg["input_shape"], legacy, lcfg.get("name") or "input_layer"))
            continue
        if cls in _MODEL_CLASSES:  # a nested model: its own config, as Keras writes one
            layers.append(model_to_keras(nested[lcfg["name"]], legacy, include_compile=False, nested=True))
            continue
        keras_layer = wrap("keras.layers", cls, _layer_to_keras(cls, lcfg, legacy), legacy)
        if not legacy and lcfg.get("name") in shapes and cls not in _BUILT_AT_INIT:
            keras_layer["build_config"] = {"input_shape": shapes[lcfg["name"]]}
        layers.append(keras_layer)
    model_cfg: Dict[str, Any] = {"name": cfg["name"], "layers": layers}
    if not legacy:
        model_cfg = {"name": cfg["name"], "trainable": cfg.get("trainable", True), "dtype": policy(False),
                     "layers": layers}
        if input_shape is not None:
            model_cfg["build_input_shape"] = [None] + input_shape
    elif cfg.get("trainable", True) is False:
        model_cfg["trainable"] = False
    out = wrap("keras", "Sequential", model_cfg, legacy)
    if not legacy:
        if input_shape is not None:
            out["build_config"] = {"input_shape": [None] + input_shape}
        if include_compile and model.compile_settings is not None:
            out["compile_config"] = compile_to_keras(describe(model), legacy=False)
    return out


def _is_model(layer: Any) -> bool:
    return hasattr(layer, "top_level_spans")


def _legacy_inbound(layer: Any, kwargs: Optional[Dict[str, Any]] = None) -> List[Any]:
    """Keras 2's inbound nodes: [[[layer name, node, tensor, call kwargs], ...]] (one node)."""
    return [[[t.layer.name, 0, 0, dict(kwargs or {})] for t in layer.inbound_tensors or []]]


def _functional_to_keras(model: Any, legacy: bool, include_compile: bool, nested: bool = False) -> Dict[str, Any]:
    """A functional ``hpcnn.Model`` as Keras' ``Functional`` config: each layer with its name and
    inbound nodes (Keras 3's ``__keras_tensor__`` records, or Keras 2's name lists with
    ``legacy``), and the input and output layers."""
    cfg = model.get_config()
    by_name = {layer.name: layer for layer in model.layers}
    layers: List[Dict[str, Any]] = []
    for entry in cfg["layers"]:
        cls, lcfg, name = entry["class_name"], entry["config"], entry["name"]
        layer = by_name[name]
        if cls == "InputLayer":
            keras_layer = _input_layer(lcfg["input_shape"], legacy, name)
            keras_layer.update(name=name, inbound_nodes=[])
            layers.append(keras_layer)
            continue
        if cls in _MODEL_CLASSES:  # a nested model: its config, called on the tensors the entry names
            keras_layer = model_to_keras(layer, legacy, include_compile=False, nested=True)
            keras_layer["name"] = name
            if legacy:
                node = entry["inbound_nodes"][0]
                keras_layer["inbound_nodes"] = [[[t["config"]["keras_history"][0], 0, 0, dict(node.get("kwargs", {}))]
                                                 for t in node["args"]]]
            else:
                keras_layer["inbound_nodes"] = copy.deepcopy(entry["inbound_nodes"])
                keras_layer["build_config"] = {"input_shape": [None] + list(layer.input_shape[1:])}
            layers.append(keras_layer)
            continue
        keras_layer = wrap("keras.layers", cls, _layer_to_keras(cls, lcfg, legacy), legacy)
        if not legacy and cls not in _BUILT_AT_INIT:
            shapes = [list(t.shape) for t in layer.inbound_tensors or []]
            keras_layer["build_config"] = {"input_shape": shapes if layer.merges_inputs else shapes[0]}
        keras_layer["name"] = name
        keras_layer["inbound_nodes"] = _legacy_inbound(layer) if legacy else copy.deepcopy(entry["inbound_nodes"])
        layers.append(keras_layer)
    # Keras 3 writes a single input or output as one [name, node, tensor] record, Keras 2 as a list
    # of them (Keras 3 reads both; tf.keras 2 only the list). A nested model's as Keras 3 does in
    # both: a list of one would make its call's output a list in Keras 3.
    inputs, outputs = cfg["input_layers"][0], cfg["output_layers"][0]
    as_list = legacy and not nested
    model_cfg: Dict[str, Any] = {"name": cfg["name"], "trainable": cfg.get("trainable", True), "layers": layers,
                                 "input_layers": [inputs] if as_list else inputs,
                                 "output_layers": [outputs] if as_list else outputs}
    if legacy:
        return wrap("keras", "Functional", model_cfg, legacy)
    out = {"module": "keras.src.models.functional", "class_name": "Functional", "config": model_cfg,
           "registered_name": "Functional", "build_config": {"input_shape": None}}
    if include_compile and model.compile_settings is not None:
        out["compile_config"] = compile_to_keras(describe(model), legacy=False)
    return out


# ---------------------------------------------------------------------- Keras -> hpcnn
def _unwrap_dtype(value: Any, where: str) -> None:
    name = value
    if isinstance(value, dict):
        cfg = value.get("config")
        name = cfg.get("name") if isinstance(cfg, dict) else None
    if name is not None and name not in _FLOAT_POLICIES:
        raise UnsupportedConfig(f"{where}: dtype {name!r:.60} is not a float type (hpcnn computes in float32)")



def _initializer_name(value: Any) -> Optional[str]:
    """'glorot_uniform', 'zeros' or 'ones' for those initializers at their defaults, else None."""
    if isinstance(value, str):
        return value.lower() if value.lower() in ("glorot_uniform", "zeros", "ones") else None
    if isinstance(value, dict):
        cls, cfg = value.get("class_name"), value.get("config") or {}
        if not isinstance(cfg, dict):
            return None
        if cls == "GlorotUniform" and cfg.get("seed") is None:
            return "glorot_uniform"
        if cls in ("Zeros", "Ones") and not cfg:
            return cls.lower()
    return None


def _batch_shape(value: Any, where: str) -> List[int]:
    if not isinstance(value, (list, tuple)) or len(value) < 2:
        raise UnsupportedConfig(f"{where}: an input shape (batch, ...) was expected, got {value!r:.100}")
    dims = list(value[1:])
    if any(d is None for d in dims):
        raise UnsupportedConfig(f"{where}: input shape {tuple(value)} has unknown dimensions; hpcnn builds models "
                               "for one fixed input shape")
    return dims


def _layer_from_keras(entry: Dict[str, Any], weights_follow: bool, index: int) -> Tuple[str, Dict[str, Any]]:
    """(hpcnn class name, hpcnn layer config) for one Keras layer entry."""
    cls = _CLASS_ALIASES.get(entry["class_name"], entry["class_name"])
    raw = entry.get("config", {})
    if not isinstance(raw, dict):
        raise UnsupportedConfig(f"layer #{index} ({cls}): its config must be a dict, got {raw!r:.100}")
    cfg = copy.deepcopy(raw)
    where = f"layer '{cfg.get('name', f'#{index}')}' ({cls})"
    if "dtype" in cfg:
        _unwrap_dtype(cfg.pop("dtype"), where)
    for key in ("batch_input_shape", "batch_shape"):
        if key in cfg:
            value = cfg.pop(key)
            if value is not None:
                cfg["input_shape"] = _batch_shape(value, where)
    if cls == "InputLayer":
        shape = cfg.get("input_shape")
        if shape is None:
            raise UnsupportedConfig(f"{where}: no input shape")
        out = {"input_shape": shape}
        if cfg.get("name"):
            out["name"] = cfg["name"]
        for key, value in cfg.items():
            if key not in ("input_shape", "name") and _NO_EFFECT.get(key, object()) != value and key != "batch_size":
                raise UnsupportedConfig(f"{where}: {key}={value!r:.60} is not supported")
        return cls, out
    for key in list(cfg):
        value = cfg[key]
        if key in _NO_EFFECT and value == _NO_EFFECT[key]:
            del cfg[key]
        elif key.endswith("_initializer"):
            name = _initializer_name(value)
            if weights_follow:
                del cfg[key]  # with weights from the file the initializer never runs
            elif name is not None:
                cfg[key] = name  # the layer takes Keras' default for it and refuses others, naming them
            else:
                raise UnsupportedConfig(f"{where}: {key}={plain(value)!r:.100} is not supported (hpcnn initializes "
                                       "with Keras' default initializers: glorot_uniform kernels, zeros biases, "
                                       "BatchNormalization's ones and zeros; load weights to use others)")
        elif key.endswith("_constraint") or key == "activity_regularizer":
            if value is not None:
                raise UnsupportedConfig(f"{where}: {key}={plain(value)!r:.100} is not supported by hpcnn")
            del cfg[key]
        elif key.endswith("_regularizer"):
            cfg[key] = plain(value)
        elif key == "seed" and cls == "Dropout":
            del cfg[key]  # hpcnn draws dropout masks from the model's seed
        elif isinstance(value, dict) and "class_name" in value:
            cfg[key] = plain(value)
    if cls == "LeakyReLU" and "alpha" in cfg and "negative_slope" not in cfg:  # Keras 2's name
        cfg["negative_slope"] = cfg.pop("alpha")
    if cls == "BatchNormalization" and isinstance(cfg.get("axis"), list) and len(cfg["axis"]) == 1:
        cfg["axis"] = cfg["axis"][0]  # tf.keras 2 saves the built layer's axis as a list, [3] for images
    return cls, cfg


def _layer_entries(config: Any, where: str) -> Tuple[str, Dict[str, Any], List[Dict[str, Any]]]:
    """(model class, model config, layer entries) of a Keras model config, either shape."""
    if not isinstance(config, dict) or not isinstance(config.get("class_name"), str):
        raise UnsupportedConfig(f"{where}: a Keras model config is a dict with 'class_name' and 'config', "
                               f"got {str(config)[:200]}")
    cls = config["class_name"]
    inner = config.get("config")
    if isinstance(inner, list):  # Keras 1 / early Keras 2 Sequential: the config is the layer list
        inner = {"layers": inner}
    if cls not in _MODEL_CLASSES:
        raise UnsupportedConfig(f"{where}: the config describes a {cls!r:.60}, not a model (Sequential or Functional)")
    if not isinstance(inner, dict) or not isinstance(inner.get("layers"), list):
        raise UnsupportedConfig(f"{where}: the {cls} config has no 'layers' list")
    for i, entry in enumerate(inner["layers"]):
        if not isinstance(entry, dict) or not isinstance(entry.get("class_name"), str):
            raise UnsupportedConfig(f"{where}: layer #{i} is not a dict with a 'class_name', got {str(entry)[:200]}")
    return cls, inner, inner["layers"]


# Class names are plain identifiers: hpcnn looks them up in its own tables, never as a module path.
_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,99}")
# Keras classes that carry Python code (a marshalled function, a TensorFlow op by name).
_CODE_CLASSES = ("Lambda", "TFOpLambda", "SlicingOpLambda", "__lambda__")
_NOTHING_RUNS = ("hpcnn builds only the Keras classes in its own table, by plain name: nothing a file names is "
                 "imported, evaluated or unpickled (Lambda layers hold Python code, which Keras' own "
                 "safe_mode=True refuses too; custom objects would need their code imported)")


def _custom(entry: Dict[str, Any]) -> Optional[str]:
    """How a serialized object names code outside Keras (None for Keras' own): a registered name
    ('package>Name') or a module that is not Keras'."""
    registered, module = entry.get("registered_name"), entry.get("module")
    if registered is not None and (not isinstance(registered, str) or ">" in registered):
        return f"custom: {str(registered)[:60]}"
    if module is not None and (not isinstance(module, str) or module.split(".")[0] not in ("keras", "tf_keras")):
        return f"custom: module {str(module)[:60]!r}"
    return None


def missing_layer_classes(config: Any, where: str) -> List[str]:
    """The layer classes of a Keras model config that hpcnn does not have or will not build,
    sorted: absent ones, code (Lambda), custom objects and names that are not plain class names."""
    _, _, entries = _layer_entries(config, where)
    have = set(LAYER_CLASSES)
    missing = set()
    for entry in entries:
        raw = entry["class_name"]
        cls = _CLASS_ALIASES.get(raw, raw)
        custom = _custom(entry)
        if not _PLAIN_NAME.fullmatch(raw):
            missing.add(f"{raw[:100]!r} (not a plain class name)")
        elif cls in _CODE_CLASSES:
            missing.add(f"{cls} (Python code)")
        elif cls in _MODEL_CLASSES and entry.get("registered_name") in (None, cls, "Functional") and custom is None:
            missing.update(missing_layer_classes(entry, where))  # a nested model: its layers
        elif entry.get("registered_name") not in (None, cls) and "keras.layers" not in str(entry.get("module", "keras.layers")):
            missing.add(f"{cls} (custom: {str(entry.get('registered_name'))[:60]})")
        elif custom is not None:
            missing.add(f"{cls} ({custom})")
        elif cls not in have:
            missing.add(cls)
    return sorted(missing)


def refuse_code_and_foreign_names(config: Any, where: str) -> None:
    """UnsupportedConfig for any serialized object anywhere in `config` (initializers, activations,
    regularizers, compile settings, ...) whose class name is not a plain name, that holds code
    (``__lambda__``, Lambda) or that names code outside Keras (a custom object). Walked without
    recursion (the JSON reader bounds the depth anyway)."""
    stack = [config]
    while stack:
        value = stack.pop()
        if isinstance(value, list):
            stack.extend(value)
            continue
        if not isinstance(value, dict):
            continue
        stack.extend(value.values())
        if "class_name" not in value:
            continue
        cls = value["class_name"]
        if not isinstance(cls, str) or not _PLAIN_NAME.fullmatch(cls):
            raise UnsupportedConfig(f"{where}: class name {str(cls)[:100]!r} is not a plain class name: {_NOTHING_RUNS}")
        if cls in _CODE_CLASSES:
            raise UnsupportedConfig(f"{where}: it holds Python code ({cls}): {_NOTHING_RUNS}")
        custom = _custom(value)
        if custom is not None:
            raise UnsupportedConfig(f"{where}: {cls} is a custom object ({custom}): {_NOTHING_RUNS}")


def hpcnn_config_from_keras(config: Any, weights_follow: bool, where: str) -> Tuple[str, Dict[str, Any]]:
    """("Sequential" or "Functional", hpcnn's get_config()) of a Keras model config of either
    shape: what hpcnn.saving builds the model from. ``weights_follow``: weights are loaded next
    (initializers are then irrelevant). UnsupportedConfig (a ValueError) naming `where` and the
    layer for anything hpcnn cannot build the same way."""
    cls, inner, entries = _layer_entries(config, where)
    missing = missing_layer_classes(config, where)
    if missing:
        why = f"; {_NOTHING_RUNS}" if any("(" in m for m in missing) else ""
        raise UnsupportedConfig(f"{where}: the model uses layer classes hpcnn does not have: {', '.join(missing)} "
                               f"(hpcnn has {', '.join(sorted(LAYER_CLASSES))}; docs/keras.md lists what each "
                               f"supports){why}")
    refuse_code_and_foreign_names(config, where)
    translated = []
    for i, entry in enumerate(entries):
        if entry["class_name"] in _MODEL_CLASSES:  # a nested model: translated as a model
            name, cfg = hpcnn_config_from_keras(entry, weights_follow, f"{where}: nested model #{i}")
            item = {"class_name": name, "config": cfg}
            for key in ("name", "inbound_nodes"):
                if key in entry:
                    item[key] = entry[key]
            translated.append(item)
            continue
        try:
            name, cfg = _layer_from_keras(entry, weights_follow, i)
        except UnsupportedConfig as e:
            raise UnsupportedConfig(f"{where}: {e}") from None
        item: Dict[str, Any] = {"class_name": name, "config": cfg}
        for key in ("name", "inbound_nodes"):
            if key in entry:
                item[key] = entry[key]
        translated.append(item)
    if cls == "Sequential":
        layer_list = translated
        has_input = any(t["class_name"] == "InputLayer" for t in layer_list) or any(
            "input_shape" in t["config"] for t in layer_list[:1])
        build_shape = inner.get("build_input_shape")
        if not has_input and build_shape is not None:
            layer_list = [{"class_name": "InputLayer", "config": {"input_shape": _batch_shape(build_shape, where)}}] + layer_list
        hp_cfg: Dict[str, Any] = {"name": inner.get("name"), "layers": layer_list}
        if inner.get("trainable", True) is False:
            hp_cfg["trainable"] = False
        return "Sequential", hp_cfg
    hp_cfg = {k: v for k, v in inner.items() if k not in ("layers", "dtype")}
    hp_cfg["layers"] = translated
    for key in ("input_layers", "output_layers"):
        ref = hp_cfg.get(key)
        if isinstance(ref, list) and len(ref) == 3 and isinstance(ref[0], str):
            hp_cfg[key] = [ref]  # Keras 3 writes one input (output) as one record, not a list of them
    return "Functional", hp_cfg


def to_json(model: Any, **kwargs: Any) -> str:
    """``model.to_json()``: Keras 3's serialized config as a JSON string (``json.dumps`` arguments
    such as ``indent`` pass through)."""
    return json.dumps(model_to_keras(model, legacy=False), **kwargs)
