"""``keras.datasets`` on hpcnn: cifar10, mnist, fashion_mnist (``load_data()`` as Keras, from
hpcnn's data directory; downloaded once where the network allows)."""
from __future__ import annotations

import sys

from ... import datasets as _datasets
from .._compat import install

cifar10 = _datasets.cifar10
mnist = _datasets.mnist
fashion_mnist = _datasets.fashion_mnist
# `from hpcnn.keras.datasets.mnist import load_data` imports these as submodules.
for _name in ("cifar10", "mnist", "fashion_mnist"):
    sys.modules[f"{__name__}.{_name}"] = getattr(_datasets, _name)

install(__name__, "datasets", default_advice="hpcnn.datasets has cifar10, mnist and fashion_mnist")
