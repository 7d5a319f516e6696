"""hpcnn: convolutional networks on a C++/CUDA core, with a Keras-like API.

    import hpcnn
    from hpcnn.layers import Conv2D, MaxPooling2D, Flatten, Dense, Dropout, InputLayer, Add
    model = hpcnn.Sequential([...]); model.compile('adam', 'categorical_crossentropy', ['accuracy'])
    model.fit(x, y, batch_size=250, epochs=10)

    x = hpcnn.Input(shape=(32, 32, 3)); y = Conv2D(16, 3, padding='same')(x); ...
    model = hpcnn.Model(inputs=x, outputs=y)       # the functional API: graphs (Add, Concatenate)

Import works on any node, with or without a GPU driver. Models run on the CPU unless placed on a
GPU explicitly (``compile(device='gpu')`` or ``with hpcnn.device('gpu'):``).
"""
from __future__ import annotations

from . import blas_env

blas_env.choose()  # before the core loads OpenBLAS: its kernels for this CPU (blas_env.py says why)
from . import _core  # noqa: E402
from . import callbacks, config, data, datasets, devices, layers, losses, metrics, models, optimizers, regularizers, utils
from . import applications, distribute, errors, formats, saving, threads, training, validation
from . import keras  # Keras' namespace: `from hpcnn import keras`
from .devices import device, gpu_unavailable_reason, list_physical_devices
from .layers import Input
from .models import Model, Sequential, clone_model
from .saving import load_model
from .threads import get_num_threads, set_num_threads

__version__: str = _core.build_info()["version"]


def build_info() -> dict:
    """What this build was compiled with: version, compiler, BLAS, HDF5, CUDA/cuDNN/cuBLAS, archs."""
    return dict(_core.build_info())


__all__ = ["Input", "Model", "Sequential", "clone_model", "load_model", "data", "datasets", "device", "list_physical_devices", "gpu_unavailable_reason", "build_info",
           "get_num_threads", "set_num_threads", "callbacks", "config", "devices", "layers", "losses", "models",
           "metrics", "optimizers", "regularizers", "utils", "applications", "saving", "threads", "training", "distribute",
           "keras", "errors", "formats"]
