"""Process settings with TensorFlow's names where it has them (``tf.config``)."""
from typing import Any, Dict, List, Optional, Union

from . import _core
from .devices import list_physical_devices


def set_tf32(enabled: bool) -> None:
    """TF32 tensor-core math for float32 convolutions and matrix products on GPUs of compute
    capability 8.0+ (on by default, as in TensorFlow and PyTorch's cuDNN path). Turn it off for
    results closer to the CPU's float32. Process-wide; GPUs older than 8.0 ignore it."""
    _core.cuda_set_tf32(bool(enabled))


def tf32_enabled() -> bool:
    """Whether TF32 is allowed (the setting; it takes effect on compute capability 8.0+)."""
    return bool(_core.cuda_get_tf32())


enable_tensor_float_32_execution = set_tf32          # tf.config.experimental's name
tensor_float_32_execution_enabled = tf32_enabled

_DETERMINISM = {True: "required", "warn": "warn", False: "any"}


def set_deterministic(mode: Union[bool, str] = True) -> None:
    """Whether GPU convolutions must be deterministic (the same bits on every run, as on the CPU).

    ``True`` (the default): cuDNN algorithms are chosen among the deterministic ones only. When none
    of them fits the workspace memory available (a quarter of the GPU's free memory, at most 1 GiB),
    the convolution refuses with a ``MemoryError`` that says so, rather than silently taking a
    non-deterministic one; free GPU memory or use a smaller ``batch_size``.
    ``'warn'``: deterministic algorithms first; when none fits, a non-deterministic one is used
    and a ``RuntimeWarning`` says which.
    ``False``: the fastest algorithm that fits, deterministic or not (TensorFlow's default).

    Process-wide; convolutions choose again under a new setting. Everything else hpcnn runs on a
    GPU, and everything on the CPU, is deterministic whatever the setting."""
    if isinstance(mode, str):
        if mode != "warn":
            raise ValueError(f"set_deterministic: mode must be True, False or 'warn', got {mode!r}")
    elif not isinstance(mode, bool):
        raise ValueError(f"set_deterministic: mode must be True, False or 'warn', got {mode!r}")
    _core.cuda_set_determinism(_DETERMINISM[mode])


def deterministic() -> Union[bool, str]:
    """The setting of ``set_deterministic``: True, False or 'warn'."""
    current = _core.cuda_get_determinism()
    return {v: k for k, v in _DETERMINISM.items()}[current]


def enable_op_determinism() -> None:
    """TensorFlow's name (``tf.config.experimental.enable_op_determinism``): ``set_deterministic(True)``,
    which is hpcnn's default already."""
    set_deterministic(True)


def cudnn_algorithms(model: Optional[Any] = None, device: Optional[str] = None) -> List[Dict[str, Any]]:
    """The cuDNN algorithms chosen so far on a GPU, one dict per convolution geometry and pass
    ('forward', 'backward_data', 'backward_filter'): ``algorithm``, ``deterministic``, ``math``
    (``CUDNN_TENSOR_OP_MATH`` = TF32), ``workspace`` bytes, the ``candidates`` in the order they
    would be tried (``candidates_math``: the math type of each), cuDNN's heuristic answer
    (``offers``), the ones that ``failed`` at run time, and for the forward pass whether the
    fused convolution+bias+ReLU call is ``used`` (``fused_status``: what cuDNN answered when it
    declined it).

    With a ``model`` (on a GPU, after it has run), only its Conv2D layers' plans, each dict with
    the layer's ``layer`` name added, in layer order; ``device`` defaults to the model's (or
    'gpu:0'). Empty on a GPU where no convolution has run."""
    if device is None:
        device = model.device if model is not None else "gpu:0"
    dev = _core.normalize_device(device, False)
    if not dev.startswith("gpu:"):
        return []
    plans = list(_core.cuda_conv_plans(int(dev.split(":")[1])))
    if model is None:
        return plans
    out: List[Dict[str, Any]] = []
    for layer, shape, _ in model.layer_outputs():
        if layer.core_config()["class_name"] != "Conv2D":
            continue
        oh, ow, f = shape[-3:]
        for p in plans:
            # A layer's plans: its output size, kernel and strides (cuDNN sees an explicitly padded
            # input where Keras' 'same' pads unevenly, so the input size is not compared).
            if (tuple(p["output"][1:]) == (oh, ow, f) and tuple(p["kernel"][:2]) == tuple(layer.kernel_size)
                    and tuple(p["strides"]) == tuple(layer.strides)):
                out.append(dict(p, layer=layer.name))
    return out


__all__ = ["list_physical_devices", "set_tf32", "tf32_enabled", "enable_tensor_float_32_execution",
           "tensor_float_32_execution_enabled", "set_deterministic", "deterministic", "enable_op_determinism",
           "cudnn_algorithms"]
