"""``keras.utils`` on hpcnn: to_categorical, Sequence, set_random_seed, clear_session,
image_dataset_from_directory, plot_model (drawn with matplotlib), and the image file helpers
(load_img, img_to_array, array_to_img, save_img)."""
from __future__ import annotations

from ._compat import install
from ..data import image_dataset_from_directory
from .backend import clear_session

_PREPARE = "prepare the arrays with NumPy, or write them to HDF5 (hpcnn.data.write_hdf5) for hpcnn.data.HDF5Dataset"
_CUSTOM = ("custom objects are not supported: hpcnn's files hold hpcnn's layers only (hpcnn.keras.layers.serialize / "
           "deserialize and model.to_json() cover them)")
_LOGGING = "fit, evaluate and predict print less with verbose=0 (nothing) or verbose=2 (one line per epoch)"
_ADVICE = {
    "model_to_dot": "model.summary() prints the layers, shapes and parameters",
    "get_file": "hpcnn.datasets downloads CIFAR-10 and MNIST (checked); download other files with urllib or wget",
    "normalize": "use NumPy: x / np.linalg.norm(x, axis=-1, keepdims=True)",
    "multi_gpu_model": "data-parallel training is hpcnn.distribute.MirroredStrategy (strategy.scope())",
    "np_utils": "to_categorical is hpcnn.keras.utils.to_categorical",
    "generic_utils": "Keras 2's module: hpcnn.keras.utils has to_categorical, PyDataset, Sequence, set_random_seed",
    "legacy": "Keras 2's module: hpcnn.keras.utils has to_categorical, PyDataset, Sequence, set_random_seed",
    "Progbar": "fit, evaluate and predict draw their own progress bar (verbose=1)",
    "GeneratorEnqueuer": "give fit a PyDataset (hpcnn.keras.utils.PyDataset) or a generator; hpcnn.data.HDF5Dataset "
                         "prefetches in C++",
    "OrderedEnqueuer": "give fit a PyDataset (hpcnn.keras.utils.PyDataset) or a generator; hpcnn.data.HDF5Dataset "
                       "prefetches in C++",
    "pack_x_y_sample_weight": "give model.fit a tuple (x, y) or (x, y, sample_weight)",
    "unpack_x_y_sample_weight": "give model.fit a tuple (x, y) or (x, y, sample_weight)",
    "get_source_inputs": "a functional model's input tensors are model.inputs",
    "is_keras_tensor": "isinstance(x, hpcnn.layers.KerasTensor)",
    "standardize_dtype": "hpcnn computes in float32: numpy.asarray(x, dtype='float32')",
    "bounding_boxes": "hpcnn trains classification CNNs: keep boxes as NumPy arrays",
    "disable_interactive_logging": _LOGGING, "enable_interactive_logging": _LOGGING,
    "is_interactive_logging_enabled": _LOGGING,
}
for _name in ("Config", "FeatureSpace", "split_dataset", "timeseries_dataset_from_array", "pad_sequences",
              "text_dataset_from_directory", "audio_dataset_from_directory"):
    _ADVICE[_name] = _PREPARE
for _name in ("CustomObjectScope", "custom_object_scope", "get_custom_objects", "register_keras_serializable",
              "get_registered_name", "get_registered_object", "serialize_keras_object", "deserialize_keras_object"):
    _ADVICE[_name] = _CUSTOM
install(__name__, "utils", sources=["hpcnn.utils", "hpcnn.image_files", "hpcnn.models.model_plot"], advice=_ADVICE)

__all__ = ["clear_session", "image_dataset_from_directory"]
