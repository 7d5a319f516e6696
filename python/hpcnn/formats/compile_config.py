"""A model's compile settings in files: one codec. ``describe`` gives hpcnn's description (the
optimizer's class and config, the loss's core name with from_logits and label_smoothing, the
metrics as given, excluded weight names), which hpcnn's files hold and ``compile_from_description``
compiles a model from again. Keras' ``compile_config`` (Keras 3) and ``training_config`` (Keras 2)
are that description reshaped: ``compile_to_keras`` one way, ``description_from_keras`` the other
(refusing, with UnsupportedConfig, what hpcnn does not have)."""
from __future__ import annotations

import warnings
from typing import Any, Dict, List, Optional, Tuple

from .. import losses, metrics as metrics_mod, optimizers
from ..errors import FileProblem, UnsupportedConfig
from .keras_objects import plain, wrap


def describe(model: Any) -> Optional[Dict[str, Any]]:
    """The model's compile settings in hpcnn's layout (what its files hold; None when the model is
    not compiled): the optimizer's class and config, the loss's core name with from_logits and
    label_smoothing, the metrics as given to compile (serialized), and the optimizer's
    exclude_from_weight_decay names (not in Keras' optimizer config: kept beside it)."""
    comp, opt = model.compile_settings, model.optimizer
    if comp is None or opt is None:
        return None
    desc = {"optimizer": type(opt).__name__, "optimizer_config": opt.get_config(), "loss": comp["loss"],
            "from_logits": comp.get("from_logits", False),
            "metrics": list(comp.get("metrics_given", ["accuracy"] if comp["accuracy"] else []))}
    if comp.get("label_smoothing"):
        desc["label_smoothing"] = comp["label_smoothing"]
    if opt.excluded_weight_names:
        desc["exclude_from_weight_decay"] = list(opt.excluded_weight_names)
    return desc


def loss_object(desc: Dict[str, Any]) -> Any:
    """The loss a description names, as the object compile takes (with from_logits and
    label_smoothing); FileProblem for a loss hpcnn does not have."""
    loss = desc.get("loss")
    if not isinstance(loss, str) or loss not in losses.CORE_NAMES:
        raise FileProblem(f"unknown loss {loss!r:.100}")
    args: Dict[str, Any] = {}
    if desc.get("from_logits"):
        args["from_logits"] = True
    if desc.get("label_smoothing"):
        args["label_smoothing"] = float(desc["label_smoothing"])
    try:
        return type(losses.get(loss))(**args)
    except (ValueError, TypeError) as e:
        raise FileProblem(f"the loss settings are not valid ({e})") from None


def compile_arguments(desc: Dict[str, Any]) -> Tuple[Any, Any, List[Any]]:
    """(optimizer, loss, metrics) for ``model.compile`` from a description; FileProblem naming
    what is not valid."""
    name = desc.get("optimizer")
    if not isinstance(name, str) or name not in optimizers.REGISTRY:  # an explicit registry, never getattr
        raise FileProblem(f"unknown optimizer {name!r:.100}: hpcnn has {sorted(optimizers.REGISTRY)}")
    opt_cfg = desc.get("optimizer_config", {})
    if not isinstance(opt_cfg, dict):
        raise FileProblem(f"the optimizer config is not a dict: {opt_cfg!r:.200}")
    metrics = desc.get("metrics", [])
    if not isinstance(metrics, list):
        raise FileProblem(f"metrics is not a list: {metrics!r:.200}")
    loss = loss_object(desc)
    try:
        metrics = [metrics_mod.deserialize(m) for m in metrics]
    except (ValueError, TypeError) as e:
        raise FileProblem(f"the compile settings are not valid ({e})") from None
    try:
        opt = optimizers.REGISTRY[name].from_config(opt_cfg)  # a serialized schedule as learning_rate too
    except TypeError as e:
        raise FileProblem(f"the {name} optimizer's config is not valid ({e})") from None
    except ValueError as e:
        raise FileProblem(f"the compile settings are not valid ({e})") from None
    excluded = desc.get("exclude_from_weight_decay")
    if excluded is not None:
        opt.exclude_from_weight_decay(var_names=excluded)
    return opt, loss, metrics


def compile_from_description(model: Any, desc: Optional[Dict[str, Any]]) -> None:
    """Compiles `model` (on the CPU) as the description says; nothing for None."""
    if not desc:
        return
    opt, loss, metrics = compile_arguments(desc)
    try:
        model.compile(opt, loss, metrics, device="cpu")
    except (ValueError, TypeError) as e:
        raise FileProblem(f"its compile settings are not valid ({e})") from None


def compile_to_keras(desc: Dict[str, Any], legacy: bool) -> Dict[str, Any]:
    """hpcnn's compile description (``describe``) reshaped as Keras 3's ``compile_config`` or
    Keras 2's ``training_config``."""
    opt_cfg = dict(desc["optimizer_config"])
    for key in ("weight_decay", "clipnorm", "global_clipnorm", "clipvalue"):
        if opt_cfg.get(key) is None and legacy:
            opt_cfg.pop(key, None)  # Keras 2's optimizers know fewer of these; unset means absent
    if isinstance(opt_cfg.get("learning_rate"), dict):
        sched = opt_cfg["learning_rate"]
        # With its module even in Keras 2's shape: Keras 3 finds a schedule of a legacy .h5 file by it.
        opt_cfg["learning_rate"] = wrap("keras.optimizers.schedules", sched["class_name"], sched["config"], False)
    optimizer = wrap("keras.optimizers", desc["optimizer"], opt_cfg, legacy)
    loss: Any = desc["loss"]
    if desc.get("from_logits") or desc.get("label_smoothing"):
        # the loss object: a name alone would lose from_logits / label_smoothing
        obj = loss_object(desc)
        cls = type(obj).__name__
        lcfg: Dict[str, Any] = dict(obj.get_config())
        lcfg.update(name=loss, reduction="sum_over_batch_size" if not legacy else "auto")
        if cls in ("CategoricalCrossentropy", "BinaryCrossentropy"):
            lcfg.setdefault("axis", -1)
        elif cls == "SparseCategoricalCrossentropy":
            lcfg.update(ignore_class=None)
        loss = wrap("keras.losses", cls, lcfg, legacy)
    metrics = [m if isinstance(m, str) else wrap("keras.metrics", m["class_name"], dict(m["config"]), legacy)
               for m in desc["metrics"]] or None
    if legacy:
        return {"loss": loss, "metrics": metrics, "weighted_metrics": None, "loss_weights": None,
                "optimizer_config": optimizer}
    return {"optimizer": optimizer, "loss": loss, "loss_weights": None, "metrics": metrics, "weighted_metrics": None,
            "run_eagerly": False, "steps_per_execution": 1, "jit_compile": False}


# ---------------------------------------------------------------------- Keras -> hpcnn
def _optimizer_from_keras(value: Any, where: str) -> Dict[str, Any]:
    """{'optimizer': class, 'optimizer_config': config} of a Keras optimizer (a name or a config)."""
    if isinstance(value, str):
        opt = optimizers.get(value)
        return {"optimizer": type(opt).__name__, "optimizer_config": opt.get_config()}
    if not isinstance(value, dict) or not isinstance(value.get("class_name"), str):
        raise UnsupportedConfig(f"{where}: the optimizer {str(value)[:100]} is not a Keras optimizer config")
    name = value["class_name"]
    if name.startswith("Custom>") and name[len("Custom>"):] in optimizers.REGISTRY:
        name = name[len("Custom>"):]  # tf.keras 2.11-2.15 registered its built-in optimizers so
    if name not in optimizers.REGISTRY:  # an explicit registry, never getattr
        raise UnsupportedConfig(f"{where}: optimizer {name!r:.60} is not one hpcnn has ({', '.join(sorted(optimizers.REGISTRY))})")
    cfg = dict(value.get("config") or {})
    for key, default in (("jit_compile", None), ("is_legacy_optimizer", None), ("decay", 0.0), ("amsgrad", False)):
        if key in cfg:
            v = cfg.pop(key)
            if default is not None and v != default:
                raise UnsupportedConfig(f"{where}: {name}({key}={v!r:.40}) is not supported by hpcnn")
    if not cfg.get("use_ema") and "ema_overwrite_frequency" in cfg:
        del cfg["ema_overwrite_frequency"]  # no effect without use_ema (tf.keras 2's RMSprop writes 100)
    if "lr" in cfg and "learning_rate" not in cfg:  # Keras 2's early name
        cfg["learning_rate"] = cfg.pop("lr")
    if isinstance(cfg.get("learning_rate"), dict):
        cfg["learning_rate"] = plain(cfg["learning_rate"])
    try:
        optimizers.REGISTRY[name].from_config(cfg)  # checked now: an argument hpcnn lacks is named here
    except (TypeError, ValueError) as e:
        raise UnsupportedConfig(f"{where}: the {name} optimizer's config is not one hpcnn can use ({e})") from None
    return {"optimizer": name, "optimizer_config": cfg}


# What hpcnn's loss classes take of a Keras loss config (the rest must be at Keras' default).
_LOSS_ARGS = {"CategoricalCrossentropy": ("from_logits", "label_smoothing"),
              "BinaryCrossentropy": ("from_logits", "label_smoothing"),
              "SparseCategoricalCrossentropy": ("from_logits",)}


def _loss_from_keras(value: Any, where: str) -> Dict[str, Any]:
    """{'loss': core name, 'from_logits', 'label_smoothing'} of a Keras loss (a name or a config)."""
    if isinstance(value, str):
        try:
            obj = losses.get(value)
        except ValueError as e:  # a loss hpcnn does not have (yet)
            raise UnsupportedConfig(f"{where}: {e}") from None
        return {"loss": obj.core_name, "from_logits": False}
    if isinstance(value, dict) and value.get("class_name") in losses.CLASSES:
        cfg = dict(value.get("config") or {})
        taken = _LOSS_ARGS.get(value["class_name"], ())
        args = {key: cfg.pop(key) for key in taken if key in cfg}
        for key, default in (("label_smoothing", 0.0), ("axis", -1), ("ignore_class", None)):
            if key in cfg and cfg[key] != default:
                raise UnsupportedConfig(f"{where}: {value['class_name']}({key}={cfg[key]!r:.40}) is not supported yet")
        try:
            obj = losses.CLASSES[value["class_name"]](**args)
        except (TypeError, ValueError) as e:
            raise UnsupportedConfig(f"{where}: {e}") from None
        out = {"loss": obj.core_name, "from_logits": bool(obj.from_logits)}
        if obj.label_smoothing:
            out["label_smoothing"] = float(obj.label_smoothing)
        return out
    raise UnsupportedConfig(f"{where}: loss {str(plain(value))[:100]} is not one hpcnn has yet "
                           "(categorical_crossentropy, sparse_categorical_crossentropy, binary_crossentropy, mse, mae)")


def _metrics_from_keras(value: Any, where: str) -> List[Any]:
    if value is None:
        return []
    if isinstance(value, dict):  # Keras 2 could key metrics by output
        value = [m for ms in value.values() for m in (ms if isinstance(ms, list) else [ms])]
    if not isinstance(value, list):
        raise UnsupportedConfig(f"{where}: metrics {str(value)[:100]} is not a list")
    out = []
    for m in value:
        if isinstance(m, list):  # Keras 3 nests a list per output
            out.extend(_metrics_from_keras(m, where))
        elif isinstance(m, str):
            out.append(m)
        elif isinstance(m, dict) and m.get("class_name") in metrics_mod.CLASSES and isinstance(m.get("config"), dict):
            # a metric object hpcnn has: its arguments (k, threshold) and name kept
            cfg = {k: v for k, v in m["config"].items() if k in ("name", "k", "threshold")}
            try:
                obj = metrics_mod.CLASSES[m["class_name"]](**cfg)
            except (TypeError, ValueError) as e:
                raise UnsupportedConfig(f"{where}: metric {m['class_name']}: {e}") from None
            out.append(metrics_mod.serialize(obj))
        elif isinstance(m, dict) and isinstance(m.get("config"), dict) and isinstance(m["config"].get("name"), str):
            out.append(m["config"]["name"])
        else:
            raise UnsupportedConfig(f"{where}: metric {str(m)[:100]} is not one hpcnn reads")
    return out


def description_from_keras(config: Any, where: str) -> Optional[Dict[str, Any]]:
    """hpcnn's compile description of Keras' compile_config (Keras 3) or training_config (Keras 2);
    None when they name no loss (Keras records an uncompiled model so). UnsupportedConfig naming
    what hpcnn does not have."""
    if not isinstance(config, dict):
        raise UnsupportedConfig(f"{where}: the compile settings are not a dict")
    if config.get("loss") is None:
        return None
    for key in ("loss_weights", "weighted_metrics"):
        if config.get(key) not in (None, [], {}):
            raise UnsupportedConfig(f"{where}: compile({key}=...) is not supported by hpcnn")
    opt_value = config.get("optimizer", config.get("optimizer_config"))
    desc = _optimizer_from_keras(opt_value if opt_value is not None else "rmsprop", where)
    desc.update(_loss_from_keras(config.get("loss"), where))
    desc["metrics"] = _metrics_from_keras(config.get("metrics"), where)
    return desc


def compile_or_warn(model: Any, config: Any, caller: str) -> None:
    """Compiles as Keras' compile settings say; settings hpcnn does not have leave the model
    uncompiled with a warning (its architecture and weights are there), as Keras does for a
    compile it cannot restore."""
    if config is None:
        return
    try:
        compile_from_description(model, description_from_keras(config, "compile settings"))
    except (FileProblem, NotImplementedError) as e:
        warnings.warn(f"{caller}: the model is loaded but not compiled: {e}. Call model.compile() before fit or "
                      "evaluate.", UserWarning, stacklevel=3)
