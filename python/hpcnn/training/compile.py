"""``Model.compile``: the optimizer, loss and metrics resolved and handed to the core with the
layers' trainable flags, the device chosen, and a model made in a strategy's scope distributed;
and the two things every training entry point does first (follow an ``hpcnn.device`` block, hand
a float learning rate set on the optimizer to the core)."""
from __future__ import annotations

from typing import Any, Dict, Optional, Sequence

from .. import devices, distribute, losses, metrics as metrics_mod, optimizers, validation
from ..formats import compile_config


def compile_model(model: Any, optimizer: Any, loss: Any, metrics: Optional[Sequence[Any]], device: Optional[str],
                  kwargs: Dict[str, Any]) -> None:
    """``Model.compile`` (its docstring says what the arguments mean)."""
    for k in ("loss_weights", "weighted_metrics"):
        if kwargs.pop(k, None) is not None:
            raise ValueError(f"compile: {k} is not supported")
    if "run_eagerly" in kwargs:
        validation.boolean(kwargs.pop("run_eagerly"), "run_eagerly", "compile")
    if "jit_compile" in kwargs:
        jit = kwargs.pop("jit_compile")
        if jit != "auto":
            validation.boolean(jit, "jit_compile", "compile")
    if "steps_per_execution" in kwargs:
        validation.integer(kwargs.pop("steps_per_execution"), "steps_per_execution", "compile")
    validation.no_other_arguments(kwargs, "compile")
    if loss is None:
        raise ValueError("compile: a loss is required ('categorical_crossentropy', "
                         "'sparse_categorical_crossentropy', 'binary_crossentropy', 'mse' or 'mae')")
    opt = optimizers.get(optimizer)
    spec = losses.resolve(loss)
    core = model.core
    units = int(core.output_shapes[-1][-1])
    metric_objs = metrics_mod.resolve(metrics, spec["loss"], units)
    core_metrics, where = metrics_mod.core_specs(metric_objs, spec["loss"])
    strategy = distribute.current_strategy() or model.distribute_strategy
    if strategy is not None and device is not None:
        raise ValueError("compile: device= cannot be combined with a distribution strategy: the model's devices "
                         f"are the strategy's ({strategy.local_devices})")
    target = device if device is not None else devices.current_scope()
    if target is not None and strategy is None:
        core.to(devices.normalize(target))
    mask = model.trainable_mask()
    core.compile(opt.core_config(model.weight_names()), spec["loss"], spec["from_logits"],
                 spec["label_smoothing"])
    core.set_metrics(core_metrics)
    core.set_trainable(mask)
    model.optimizer = opt
    opt.attach(model)  # optimizer.learning_rate / iterations read this model's core from now on
    # "accuracy": whether any metric is reported (files written before metrics objects read it)
    model.compile_settings = {"loss": spec["loss"], "accuracy": bool(metric_objs), "from_logits": spec["from_logits"],
                              "label_smoothing": spec["label_smoothing"], "loss_object": spec["object"],
                              "metrics": [m.name for m in metric_objs], "metric_sources": where,
                              "metric_directions": {m.name: m.direction for m in metric_objs},
                              "metrics_given": [metrics_mod.serialize(m) for m in (metrics or [])],
                              "trainable": mask}
    model.distribute_strategy = None
    if strategy is not None:
        try:
            distribute_model(strategy, model)  # this process's replicas, rank 0's weights everywhere
        except BaseException:
            model.compile_settings = None  # not half distributed: compile again
            raise


def distribute_model(strategy: Any, model: Any) -> None:
    """A compiled model trains with `strategy` from now on: every rank must have built and compiled
    the same model with the same build (its config, compile settings and hpcnn's build are
    compared: distribute.build_description), a seed drawn at random is rank
    0's everywhere, and the replicas start from rank 0's weights."""
    description = {"config": model.get_config(), "compile": compile_config.describe(model),
                   "seed": None if model.seed_drawn else int(model.seed)}
    seed = strategy.distribute(model.core, description, int(model.seed))
    if seed != model.seed:
        model.set_rng_state(seed, 0)
    model.distribute_strategy = strategy


def follow_device_scope(model: Any) -> None:
    """A model used inside ``hpcnn.device(...)`` moves to that device first."""
    scope = devices.current_scope()
    if scope is not None and scope != model.core.device:
        model.core.to(scope)


def sync_learning_rate(model: Any) -> None:
    """A float rate set on the optimizer reaches the core (also when the optimizer was given to
    another model's compile since); a schedule is evaluated by the core itself."""
    opt = model.optimizer
    if opt is not None and model.built and model.compile_settings is not None:
        rate = opt.fixed_learning_rate
        if rate is not None and model.core.learning_rate != rate:
            model.core.learning_rate = rate
