"""Process settings with TensorFlow's names where it has them (``tf.config``)."""
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

__all__ = ["list_physical_devices", "set_tf32", "tf32_enabled", "enable_tensor_float_32_execution",
           "tensor_float_32_execution_enabled"]
