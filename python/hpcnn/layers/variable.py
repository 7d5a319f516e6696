"""``Variable``: one weight of a layer as Keras 3 shows it (``layer.kernel``, ``model.weights``).

It holds no values: it reads and writes its slot of the layer's weights wherever they live (the
core of the layer's home, weight_home.py; on a GPU too), so it is never stale. ``numpy()`` and
``value`` are host copies; ``assign()`` writes through to every model that shares the layer.
Arithmetic works as on a NumPy array (``kernel * 2``, ``np.mean(kernel)``) and gives arrays.
"""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np

from . import weight_home


class Variable(np.lib.mixins.NDArrayOperatorsMixin):
    """A layer's weight: ``name`` ('kernel'), ``path`` (Keras 3's, 'conv2d/kernel' or, for a
    layer built by a Sequential, 'sequential/conv2d/kernel'), ``shape``, ``dtype`` ('float32'),
    ``trainable`` (False for BatchNormalization's moving statistics and for the weights of a
    layer with ``trainable = False``), ``value`` / ``numpy()`` (a NumPy copy), ``assign(value)``,
    ``assign_add``, ``assign_sub``."""

    # == compares values element-wise (NumPy's operators); hashing is by identity, so variables
    # can still key a dict or fill a set.
    __hash__ = object.__hash__

    def __init__(self, layer: Any, index: int) -> None:
        self.layer = layer
        self.index = index
        name, shape, trainable = weight_home.specs(layer)[index]
        self.name = name
        self.shape: Tuple[int, ...] = tuple(shape)
        self.weight_trainable = trainable  # the weight's kind: False for moving statistics
        self.dtype = "float32"

    @property
    def path(self) -> str:
        return f"{self.layer.weights_path}{self.name}"

    @property
    def trainable(self) -> bool:
        return bool(self.weight_trainable and self.layer.trainable)

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64))

    def numpy(self) -> np.ndarray:
        return weight_home.read(self.layer)[self.index]

    @property
    def value(self) -> np.ndarray:
        return self.numpy()

    def assign(self, value: Any) -> "Variable":
        ws = weight_home.read(self.layer)
        a = np.asarray(value, dtype=np.float32)
        if a.shape != self.shape:
            raise ValueError(f"The shape of the target variable and the shape of the target value in `variable."
                             f"assign(value)` must match. variable.shape={self.shape}, Received: value.shape={a.shape}. "
                             f"Target variable: {self!r:.120}")
        ws[self.index] = a
        weight_home.write(self.layer, ws)
        return self

    def assign_add(self, value: Any) -> "Variable":
        return self.assign(self.numpy() + np.asarray(value, dtype=np.float32))

    def assign_sub(self, value: Any) -> "Variable":
        return self.assign(self.numpy() - np.asarray(value, dtype=np.float32))

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        a = self.numpy()
        return a if dtype is None else a.astype(dtype)

    def __array_ufunc__(self, ufunc: Any, method: str, *inputs: Any, **kwargs: Any) -> Any:
        args = [x.numpy() if isinstance(x, Variable) else x for x in inputs]
        return getattr(ufunc, method)(*args, **kwargs)

    def __getitem__(self, key: Any) -> np.ndarray:
        return self.numpy()[key]

    def __repr__(self) -> str:
        return f"<Variable path={self.path}, shape={self.shape}, dtype={self.dtype}, value={self.numpy()}>"
