"""``keras.layers`` on hpcnn: hpcnn.layers under Keras' names (``merge`` too, the Keras 2 module
old tutorials import). Layers hpcnn lacks raise NotImplementedError naming the alternative."""
from __future__ import annotations

from ... import layers as _layers
from .._compat import install
from . import merge

_CONV = "hpcnn has Conv2D (any kernel size and stride, 'same'/'valid')"
_RNN = "recurrent and text layers are not implemented: hpcnn is for convolutional networks"
_AUG = ("hpcnn's augmentation layers are RandomFlip, RandomTranslation, RandomRotation, RandomZoom and RandomCrop "
        "(with Rescaling); for others, transform the arrays (NumPy) before fit")
_MERGE = "merging layers need the functional API (hpcnn.Model), which is not in this hpcnn yet"

_ADVICE = {
    "Layer": "custom layers (subclasses of Layer) are not supported: hpcnn's layers run in C++",
    "Lambda": "Lambda layers run Python per batch; hpcnn runs every layer in C++: not supported",
    "Conv1D": _CONV + "; treat 1-D data as (length, 1, channels) with kernel_size=(k, 1)",
    "Conv3D": _CONV, "Conv2DTranspose": _CONV + "; no transposed convolution yet",
    "Conv1DTranspose": _CONV, "Conv3DTranspose": _CONV, "DepthwiseConv2D": _CONV, "SeparableConv2D": _CONV,
    "SeparableConv1D": _CONV, "DepthwiseConv1D": _CONV,
    "PReLU": "use ReLU or LeakyReLU",
    "Add": _MERGE, "Concatenate": _MERGE, "Multiply": _MERGE, "Average": _MERGE, "Maximum": _MERGE,
    "Minimum": _MERGE, "Subtract": _MERGE, "Dot": _MERGE,
    "LSTM": _RNN, "GRU": _RNN, "SimpleRNN": _RNN, "Bidirectional": _RNN, "Embedding": _RNN, "RNN": _RNN,
    "ConvLSTM2D": _RNN, "TimeDistributed": _RNN, "MultiHeadAttention": _RNN, "Attention": _RNN,
    "Reshape": "Flatten is hpcnn's only reshaping layer", "Permute": "Flatten is hpcnn's only reshaping layer",
    "UpSampling2D": "not implemented", "Cropping2D": "not implemented",
    "SpatialDropout2D": "use Dropout", "GaussianNoise": "use Dropout", "GaussianDropout": "use Dropout",
    "AlphaDropout": "use Dropout",
    "RandomContrast": _AUG, "RandomBrightness": _AUG, "Resizing": _AUG, "Normalization": _AUG,
}
_MERGING = ("Add", "Concatenate", "Multiply", "Average", "Maximum", "Minimum", "Subtract", "Dot")
# The merging layers import (scripts import them beside the layers they use); using one raises
# NotImplementedError until hpcnn has them.
install(__name__, "layers", sources=["hpcnn.layers"], advice=_ADVICE, exclude=["Layer"], placeholders=_MERGING,
        default_advice="hpcnn's layers are " + ", ".join(sorted(_layers.LAYER_CLASSES)))
