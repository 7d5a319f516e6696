"""``keras.layers`` on hpcnn: hpcnn.layers under Keras' names (``merge`` too, the Keras 2 module
old tutorials import), with Keras' functional forms ``add`` and ``concatenate``. Layers hpcnn
lacks raise NotImplementedError naming what is missing and the nearest thing hpcnn has."""
from __future__ import annotations

from ... import layers as _layers
from .._compat import install
from . import merge
from .merge import MERGE_ADVICE

# Keras' older spellings of the 2-D convolutions (Keras 3 keeps them as aliases).
Convolution2D = _layers.Conv2D
SeparableConvolution2D = _layers.SeparableConv2D

_ONE_D = ("hpcnn's layers are 2-D (NHWC images): treat 1-D data as (length, 1, channels) and use the 2-D layer "
          "(Conv2D with kernel_size=(k, 1), MaxPooling2D((p, 1)), GlobalAveragePooling2D, ZeroPadding2D)")
_THREE_D = "hpcnn's layers are 2-D (NHWC images): use Conv2D, MaxPooling2D, AveragePooling2D, ... on 2-D images"
_UPSAMPLE = ("hpcnn has no upsampling or transposed convolution (it trains classification CNNs): Conv2D, "
             "pooling, Flatten and Dense are its building blocks")
_SEQUENCE = ("recurrent, attention and text layers are not in hpcnn (it runs convolutional networks): for "
             "sequences use Conv2D over (length, 1, channels) with kernel_size=(k, 1) and GlobalMaxPooling2D; "
             "encode text as arrays with NumPy first")
_NORMALIZE = "use BatchNormalization"
_DROPOUT = "use Dropout"
_AUG = ("hpcnn's augmentation layers are RandomFlip, RandomTranslation, RandomRotation, RandomZoom and RandomCrop "
        "(Rescaling scales); other augmentations: transform the arrays with NumPy before fit")
_PREPROCESS = ("prepare the arrays with NumPy before fit (utils.to_categorical one-hot encodes class indices); "
               "inside the model, Rescaling(scale, offset) scales per channel")
_FOREIGN = ("modules of other frameworks do not run in hpcnn: rebuild the model from hpcnn.keras.layers "
            "(its weights move with get_weights / set_weights or Keras' files)")

_ADVICE = {
    "Layer": "custom layers (subclasses of Layer with a Python call()) are not supported: hpcnn's layers run in "
             "C++; compose hpcnn.keras.layers in a Sequential or a functional Model(inputs, outputs)",
    "Lambda": "a Lambda layer runs Python code inside the model and hpcnn's layers run in C++: use a built-in "
              "layer or activation instead (Activation('tanh'), Rescaling(scale, offset), Add, Concatenate, "
              "...), or do the computation with NumPy on the arrays (before fit, after predict)",
    "InputSpec": "hpcnn checks shapes itself: declare the input with Input(shape) or InputLayer(input_shape=...)",
    "Identity": "use Activation('linear') (passes its input through)",
    "ActivityRegularization": "penalise the weights instead: kernel_regularizer= / bias_regularizer= on Conv2D "
                              "and Dense (regularizers.l1, l2, l1_l2)",
    "PReLU": "use LeakyReLU (a fixed slope) or ReLU",
    "Permute": "Flatten and Reshape (row-major order) are hpcnn's reshaping layers; transpose the arrays with NumPy "
               "before fit",
    "Cropping2D": "crop the arrays with NumPy before fit (x[:, top:-bottom, left:-right, :]); RandomCrop crops "
                  "at random in training",
    "Cropping1D": _ONE_D, "Cropping3D": _THREE_D,
    "EinsumDense": "use Dense", "DenseFeatures": "use Dense on the feature arrays",
    "Embedding": "one-hot encode the indices (utils.to_categorical) and use Dense: the same map, computed densely",
    "Resizing": "resize the images before fit (Pillow, or NumPy for integer factors); AveragePooling2D halves "
                "the size inside the model",
    "CenterCrop": "crop the arrays with NumPy before fit; RandomCrop crops at random in training and takes the "
                  "centre in evaluate/predict",
    **MERGE_ADVICE,
    "GaussianNoise": "use Dropout to regularise, or add noise to the arrays with NumPy",
    "GaussianDropout": _DROPOUT, "AlphaDropout": _DROPOUT, "SpatialDropout1D": _DROPOUT,
    "SpatialDropout2D": _DROPOUT, "SpatialDropout3D": _DROPOUT,
    "LayerNormalization": _NORMALIZE, "GroupNormalization": _NORMALIZE, "RMSNormalization": _NORMALIZE,
    "UnitNormalization": _NORMALIZE, "SpectralNormalization": _NORMALIZE,
    "AdaptiveAveragePooling2D": "use GlobalAveragePooling2D (a 1x1 output), or AveragePooling2D with the pool "
                                "size that gives the output size",
    "AdaptiveMaxPooling2D": "use GlobalMaxPooling2D (a 1x1 output), or MaxPooling2D with the pool size that gives "
                            "the output size",
    "Conv2DTranspose": _UPSAMPLE, "Convolution2DTranspose": _UPSAMPLE, "UpSampling2D": _UPSAMPLE,
    "UpSampling1D": _UPSAMPLE, "UpSampling3D": _UPSAMPLE, "Conv1DTranspose": _UPSAMPLE,
    "Convolution1DTranspose": _UPSAMPLE, "Conv3DTranspose": _UPSAMPLE, "Convolution3DTranspose": _UPSAMPLE,
    "DepthwiseConv1D": _ONE_D, "SeparableConv1D": _ONE_D, "SeparableConvolution1D": _ONE_D,
    "FlaxLayer": _FOREIGN, "JaxLayer": _FOREIGN, "TorchModuleWrapper": _FOREIGN, "TFSMLayer": _FOREIGN,
    "MelSpectrogram": "compute spectrograms with NumPy/SciPy on the arrays and train a Conv2D model on them",
    "STFTSpectrogram": "compute spectrograms with NumPy/SciPy on the arrays and train a Conv2D model on them",
    "experimental": "hpcnn has none of Keras' experimental layers: its layers are in hpcnn.keras.layers",
}
for _name in ("Conv1D", "Convolution1D", "AveragePooling1D", "AvgPool1D", "MaxPooling1D", "MaxPool1D",
              "GlobalAveragePooling1D", "GlobalAvgPool1D", "GlobalMaxPooling1D", "GlobalMaxPool1D", "ZeroPadding1D",
              "AdaptiveAveragePooling1D", "AdaptiveMaxPooling1D"):
    _ADVICE[_name] = _ONE_D
for _name in ("Conv3D", "Convolution3D", "AveragePooling3D", "AvgPool3D", "MaxPooling3D", "MaxPool3D",
              "GlobalAveragePooling3D", "GlobalAvgPool3D", "GlobalMaxPooling3D", "GlobalMaxPool3D", "ZeroPadding3D",
              "AdaptiveAveragePooling3D", "AdaptiveMaxPooling3D"):
    _ADVICE[_name] = _THREE_D
for _name in ("LSTM", "GRU", "SimpleRNN", "RNN", "LSTMCell", "GRUCell", "SimpleRNNCell", "StackedRNNCells",
              "CuDNNLSTM", "CuDNNGRU", "ConvLSTM1D", "ConvLSTM2D", "ConvLSTM3D", "Bidirectional", "TimeDistributed",
              "Wrapper", "Attention", "AdditiveAttention", "MultiHeadAttention", "GroupQueryAttention",
              "ReversibleEmbedding", "Masking", "RepeatVector", "TextVectorization"):
    _ADVICE[_name] = _SEQUENCE
for _name in ("AugMix", "AutoContrast", "ContrastLimitedAdaptiveHistogramEqualization", "CutMix", "Equalization",
              "MaxNumBoundingBoxes", "MixUp", "Pipeline", "RandAugment", "RandomBrightness", "RandomColorDegeneration",
              "RandomColorJitter", "RandomContrast", "RandomElasticTransform", "RandomErasing", "RandomGaussianBlur",
              "RandomGrayscale", "RandomHue", "RandomInvert", "RandomPerspective", "RandomPosterization",
              "RandomSaturation", "RandomSharpness", "RandomShear", "Solarization"):
    _ADVICE[_name] = _AUG
for _name in ("CategoryEncoding", "Discretization", "Hashing", "HashedCrossing", "IntegerLookup", "StringLookup"):
    _ADVICE[_name] = _PREPROCESS

_MERGING = ("Add", "Concatenate", "Multiply", "Average", "Maximum", "Minimum", "Subtract", "Dot", "add", "concatenate",
            "multiply", "average", "maximum", "minimum", "subtract", "dot")
# The merging layers import (scripts import them beside the layers they use); one hpcnn lacks
# raises NotImplementedError, naming the recipe that works, when it is used.
install(__name__, "layers", sources=["hpcnn.layers"], advice=_ADVICE, exclude=["Layer"], placeholders=_MERGING,
        default_advice="hpcnn's layers are " + ", ".join(sorted(_layers.LAYER_CLASSES)))
