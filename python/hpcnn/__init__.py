"""hpcnn: convolutional networks on a C++/CUDA core, with a Keras-like API.

    import hpcnn
    from hpcnn.layers import Conv2D, MaxPooling2D, Flatten, Dense, Dropout, InputLayer
    model = hpcnn.Sequential([...]); model.compile('adam', 'categorical_crossentropy', ['accuracy'])
    model.fit(x, y, batch_size=250, epochs=10)

Import works on any node, with or without a GPU driver. Models run on the CPU unless placed on a
GPU explicitly (``compile(device='gpu')`` or ``with hpcnn.device('gpu'):``).
"""
from __future__ import annotations

from . import _core
from . import callbacks, config, data, datasets, devices, layers, losses, models, optimizers, utils
from . import applications, saving, training, validation
from .devices import device, gpu_unavailable_reason, list_physical_devices
from .models import Sequential, clone_model

__version__: str = _core.build_info()["version"]


def build_info() -> dict:
    """What this build was compiled with: version, compiler, BLAS, HDF5, CUDA/cuDNN/cuBLAS, archs."""
    return dict(_core.build_info())


def get_num_threads() -> int:
    """Number of CPU threads hpcnn uses (its own pool; the BLAS is kept at one thread inside it)."""
    return _core.get_num_threads()


def set_num_threads(n: int) -> None:
    """Set hpcnn's CPU thread count (default: SLURM_CPUS_PER_TASK, else OMP_NUM_THREADS, else the
    CPUs in this process's affinity mask, never the node's total core count).

    Safe at any moment, from any thread: work already running (another thread's training step, an
    ``HDF5Dataset`` loading in the background) finishes first, on the threads it started with.
    If the system refuses a new thread, RuntimeError says so and the count stays as it was."""
    _core.set_num_threads(validation.integer(n, "n", "set_num_threads", maximum=_core.max_num_threads()))


__all__ = ["Sequential", "clone_model", "data", "datasets", "device", "list_physical_devices", "gpu_unavailable_reason", "build_info",
           "get_num_threads", "set_num_threads", "callbacks", "config", "devices", "layers", "losses", "models",
           "optimizers", "utils", "applications", "saving", "training"]
