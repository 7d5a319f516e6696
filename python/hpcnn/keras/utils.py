"""``keras.utils`` on hpcnn: to_categorical, Sequence, set_random_seed, clear_session."""
from __future__ import annotations

from ._compat import install
from .backend import clear_session

_ADVICE = {
    "PyDataset": "not yet: subclass hpcnn.keras.utils.Sequence (the same __len__ / __getitem__ protocol)",
    "plot_model": "model.summary() prints the layers, shapes and parameters",
    "model_to_dot": "model.summary() prints the layers, shapes and parameters",
    "get_file": "hpcnn.datasets downloads CIFAR-10 and MNIST (checked); other downloads are not supported",
    "image_dataset_from_directory": "write the images to an HDF5 file (hpcnn.data.write_hdf5) and train from "
                                    "hpcnn.data.HDF5Dataset",
    "normalize": "use NumPy: x / np.linalg.norm(x, axis=-1, keepdims=True)",
    "multi_gpu_model": "multi-GPU training is not in this hpcnn version",
    "np_utils": "to_categorical is hpcnn.keras.utils.to_categorical",
}
install(__name__, "utils", sources=["hpcnn.utils"], advice=_ADVICE)

__all__ = ["clear_session"]
