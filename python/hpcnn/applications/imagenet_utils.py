"""What the ImageNet backbones share, as Keras' ``keras.applications.imagenet_utils``:
``preprocess_input`` (the three modes: 'caffe' for VGG16 and ResNet50, 'tf' for MobileNetV2,
'torch'), ``decode_predictions`` (ImageNet's class index, Keras' own file in Keras' cache folder),
and the argument checks and pieces every backbone's builder uses (``obtain_input_shape``, the
input, the pooling head, the weights file).

hpcnn's models have a fixed input shape: where Keras leaves height and width open
(``include_top=False`` without ``input_shape``: (None, None, 3)), hpcnn takes the network's
default size (224x224x3); pass ``input_shape`` for another.
"""
from __future__ import annotations

import json
import warnings
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from .. import validation
from ..errors import FileProblem
from ..layers import GlobalAveragePooling2D, GlobalMaxPooling2D, Input, KerasTensor, Rescaling
from .weight_files import get_file

CLASS_INDEX_PATH = "https://storage.googleapis.com/download.tensorflow.org/data/imagenet_class_index.json"
CLASS_INDEX_FILE = "imagenet_class_index.json"
CLASS_INDEX_HASH = "c2c37ea517e94d9795004a39431a14cb"

_CAFFE_MEAN = (103.939, 116.779, 123.68)  # BGR, ImageNet's mean pixel
_TORCH_MEAN = (0.485, 0.456, 0.406)
_TORCH_STD = (0.229, 0.224, 0.225)
_class_index: Optional[Dict[str, List[str]]] = None


# ---------------------------------------------------------------------- preprocess_input, decode_predictions
def preprocess_input(x: Any, data_format: Optional[str] = None, mode: str = "caffe") -> Any:
    """Prepares a batch of images (values 0..255, (..., height, width, 3)) as a network was trained.

    Parameters
    ----------
    x : array_like or KerasTensor
        Images, 3D (one) or 4D (a batch), RGB, values in [0, 255]. A float NumPy array is changed in
        place, as Keras does (pass ``np.copy(x)`` to keep it); any other input is converted to float32.
        A model's tensor (``preprocess_input(inputs)`` while building a model) gets a Rescaling layer
        for the 'tf' and 'torch' modes.
    data_format : str, optional
        'channels_last' (hpcnn's, and the default) or 'channels_first'.
    mode : str
        'caffe': RGB to BGR, then ImageNet's mean pixel subtracted, no scaling (VGG16, ResNet50);
        'tf': scaled to [-1, 1] (MobileNetV2); 'torch': scaled to [0, 1], then each channel
        normalized by ImageNet's mean and standard deviation.

    Returns
    -------
    numpy.ndarray or KerasTensor
        The preprocessed images (float32 unless a float64 array was given), or the Rescaling's output.
    """
    if mode not in ("caffe", "tf", "torch"):
        raise ValueError(f"preprocess_input: mode must be one of 'caffe', 'tf' or 'torch', got {mode!r}")
    if data_format is None:
        data_format = "channels_last"
    if data_format not in ("channels_first", "channels_last"):
        raise ValueError(f"preprocess_input: data_format must be 'channels_first' or 'channels_last', "
                         f"got {data_format!r}")
    if isinstance(x, KerasTensor):
        return _preprocess_tensor(x, data_format, mode)
    if not (isinstance(x, np.ndarray) and np.issubdtype(x.dtype, np.floating)):
        x = np.asarray(x, dtype=np.float32)
    if x.ndim not in (3, 4):
        raise ValueError(f"preprocess_input: expected one image (3D) or a batch (4D), got shape {x.shape}")
    axis = (0 if x.ndim == 3 else 1) if data_format == "channels_first" else x.ndim - 1
    if x.shape[axis] != 3:
        raise ValueError(f"preprocess_input: expected 3 color channels on axis {axis} ({data_format}), "
                         f"got shape {x.shape}")
    if mode == "tf":
        x /= 127.5
        x -= 1.0
        return x
    shape = [1] * x.ndim
    shape[axis] = 3
    if mode == "torch":
        x /= 255.0
        x -= np.asarray(_TORCH_MEAN, x.dtype).reshape(shape)
        x /= np.asarray(_TORCH_STD, x.dtype).reshape(shape)
        return x
    x = np.flip(x, axis=axis)  # RGB -> BGR (a view, as Keras' x[..., ::-1])
    x -= np.asarray(_CAFFE_MEAN, x.dtype).reshape(shape)
    return x


def _preprocess_tensor(x: KerasTensor, data_format: str, mode: str) -> KerasTensor:
    """preprocess_input inside a model (TensorFlow's transfer-learning tutorial calls it on the
    Input tensor): 'tf' and 'torch' are one Rescaling layer (scale and offset per channel)."""
    if data_format != "channels_last":
        raise ValueError("preprocess_input: hpcnn's models are channels_last; got data_format='channels_first'")
    if mode == "tf":
        return Rescaling(1.0 / 127.5, offset=-1.0)(x)
    if mode == "torch":
        return Rescaling([1.0 / (255.0 * s) for s in _TORCH_STD],
                         offset=[-m / s for m, s in zip(_TORCH_MEAN, _TORCH_STD)])(x)
    raise ValueError("preprocess_input: the 'caffe' mode (VGG16, ResNet) reverses the color channels (RGB to BGR), "
                     "which no hpcnn layer does inside a model: call it on the NumPy arrays before fit and predict "
                     "(x = preprocess_input(images))")


def class_index() -> Dict[str, List[str]]:
    """ImageNet's classes: '0' .. '999' -> [WordNet id, name], from Keras' file (downloaded into
    Keras' cache folder when it is not there)."""
    global _class_index
    if _class_index is None:
        path = get_file(CLASS_INDEX_FILE, CLASS_INDEX_PATH, CLASS_INDEX_HASH)
        with open(path, encoding="utf-8") as f:
            try:
                index = json.load(f)
            except ValueError as e:
                raise FileProblem(f"decode_predictions: '{path}' is not valid JSON ({e})") from None
        if not isinstance(index, dict) or len(index) != 1000:
            raise FileProblem(f"decode_predictions: '{path}' does not hold ImageNet's 1000 classes")
        _class_index = index
    return _class_index


def decode_predictions(preds: Any, top: int = 5) -> List[List[Tuple[str, str, float]]]:
    """The `top` classes of each row of an ImageNet model's predictions.

    Parameters
    ----------
    preds : array_like
        Shape (samples, 1000): what ``model.predict`` returns.
    top : int
        How many classes per sample.

    Returns
    -------
    list
        Per sample, a list of ``(wordnet_id, class_name, score)``, the highest score first.
    """
    preds = np.asarray(preds)
    if preds.ndim != 2 or preds.shape[1] != 1000:
        raise ValueError("decode_predictions expects a batch of predictions (a 2D array of shape (samples, 1000)); "
                         f"got shape {preds.shape}")
    top = validation.integer(top, "top", "decode_predictions", minimum=1)
    index = class_index()
    results = []
    for pred in preds:
        best = pred.argsort()[-top:][::-1]
        results.append(sorted([(*index[str(i)], pred[i]) for i in best], key=lambda r: r[2], reverse=True))
    return results


# ---------------------------------------------------------------------- the builders' arguments
def check_weights(weights: Any, include_top: bool, classes: int, builder: str) -> None:
    """Keras' checks of `weights` and `classes`."""
    if not (weights in ("imagenet", None) or isinstance(weights, (str, bytes)) or hasattr(weights, "__fspath__")):
        raise ValueError(f"{builder}: weights must be None (random initialization), 'imagenet' (pre-training on "
                         f"ImageNet), or the path to a weights file; got {weights!r:.100}")
    validation.integer(classes, "classes", builder, minimum=1)
    if weights == "imagenet" and include_top and classes != 1000:
        raise ValueError(f"{builder}: with weights='imagenet' and include_top=True, classes must be 1000, "
                         f"got classes={classes}")


def check_pooling(pooling: Any, builder: str) -> None:
    if pooling not in (None, "avg", "max"):
        raise ValueError(f"{builder}: pooling must be None, 'avg' or 'max', got {pooling!r:.100}")


def validate_activation(classifier_activation: Any, weights: Any, builder: str) -> None:
    """Pretrained weights need softmax or None (logits) as the classifier's activation (Keras' rule)."""
    if weights is None:
        return
    if classifier_activation not in ("softmax", None, "linear"):
        raise ValueError(f"{builder}: only classifier_activation='softmax' or None may be used with pretrained "
                         f"weights, got {classifier_activation!r:.100}")


def obtain_input_shape(input_shape: Any, default_size: int, min_size: int, require_flatten: bool, weights: Any,
                       builder: str) -> Tuple[int, int, int]:
    """The (height, width, channels) the model takes (Keras' obtain_input_shape, channels last).
    Where Keras leaves height and width open, hpcnn takes `default_size` (its models have a fixed
    input shape)."""
    default = (default_size, default_size, 3)
    if input_shape is None:
        return default
    if isinstance(input_shape, (str, bytes)) or not isinstance(input_shape, Sequence) or len(input_shape) != 3:
        raise ValueError(f"{builder}: input_shape must be a tuple of three integers (height, width, channels), "
                         f"got {input_shape!r:.100}")
    if any(d is None for d in input_shape):
        raise ValueError(f"{builder}: input_shape {tuple(input_shape)} has an open dimension; hpcnn's models have a "
                         f"fixed input shape: give height and width (e.g. {default})")
    shape = tuple(validation.integer(d, "input_shape", builder, minimum=1) for d in input_shape)
    if weights == "imagenet" and require_flatten and shape != default:
        raise ValueError(f"{builder}: with include_top=True and weights='imagenet', input_shape must be {default}, "
                         f"got {shape}")
    if weights == "imagenet" and shape[2] != 3:
        raise ValueError(f"{builder}: ImageNet weights need 3 input channels, got input_shape={shape}")
    if shape[2] not in (1, 3):
        warnings.warn(f"{builder}: this model usually expects 1 or 3 input channels, got input_shape={shape}",
                      UserWarning, stacklevel=3)
    if shape[0] < min_size or shape[1] < min_size:
        raise ValueError(f"{builder}: input size must be at least {min_size}x{min_size}, got input_shape={shape}")
    return shape  # type: ignore[return-value]


def model_input(input_tensor: Any, input_shape: Tuple[int, int, int], builder: str) -> Tuple[KerasTensor, KerasTensor]:
    """(the model's Input tensor, the tensor the network starts from): `input_tensor` may be the
    output of layers applied to an Input (augmentation, Rescaling), as in Keras."""
    if input_tensor is None:
        t = Input(shape=input_shape)
        return t, t
    if not isinstance(input_tensor, KerasTensor):
        raise TypeError(f"{builder}: input_tensor must be an hpcnn tensor (hpcnn.Input(shape=...) or a layer's "
                        f"output), got {type(input_tensor).__name__}")
    t = input_tensor
    while not t.layer.is_input:
        inbound = t.layer.inbound_tensors or []
        if len(inbound) != 1:
            raise ValueError(f"{builder}: input_tensor must come from one hpcnn.Input() through single-input "
                             f"layers, but {t!r} reads {len(inbound)} tensors")
        t = inbound[0]
    return t, input_tensor


def pooling_head(x: KerasTensor, pooling: Optional[str], avg_name: Optional[str] = None,
                 max_name: Optional[str] = None) -> KerasTensor:
    """include_top=False: the feature map, or its global average or max (named as the family's
    Keras builder names them: ResNet's and EfficientNet's 'avg_pool'/'max_pool', else Keras'
    default names)."""
    if pooling == "avg":
        return GlobalAveragePooling2D(name=avg_name)(x)
    if pooling == "max":
        return GlobalMaxPooling2D(name=max_name)(x)
    return x


def correct_pad(shape: Sequence[int], kernel_size: int) -> Tuple[Tuple[int, int], Tuple[int, int]]:
    """The zero padding before a strided convolution (Keras' imagenet_utils.correct_pad), from the
    input's (height, width, ...)."""
    adjust = (1 - shape[0] % 2, 1 - shape[1] % 2)
    c = kernel_size // 2
    return ((c - adjust[0], c), (c - adjust[1], c))


def load_weights(model: Any, weights: Any, fname: str, origin: str, file_hash: Optional[str], builder: str) -> None:
    """Loads Keras' ImageNet file (`weights='imagenet'`: `fname` from Keras' cache folder, downloaded
    from `origin` when missing) or a file at hand (a path), by topology as Keras does (every array
    checked first: count and shape; the model keeps its weights when one does not fit). The error
    says which file, for which model, and the layer that differs."""
    if weights is None:
        return
    path = get_file(fname, origin, file_hash) if weights == "imagenet" else weights
    try:
        model.load_weights(path)
    except ValueError as e:
        raise ValueError(f"{builder} ({model.name}, input {model.sample_shape}): {e}") from None


__all__ = ["preprocess_input", "decode_predictions", "class_index", "obtain_input_shape", "correct_pad",
           "CLASS_INDEX_PATH"]
