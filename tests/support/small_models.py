"""Small models used by several test files: a Sequential (8x8x2 input, every layer kind) and
functional graphs (Add, Concatenate, a tensor read by several layers)."""
import hpcnn
from hpcnn.layers import Add, Concatenate, Conv2D, Dense, Dropout, Flatten, InputLayer, MaxPooling2D, ReLU


def small_model(seed=3, classes=3):
    return hpcnn.Sequential([
        InputLayer(input_shape=[8, 8, 2]),
        Conv2D(4, 3, padding="same", activation="relu"),
        MaxPooling2D(2, padding="same"),
        Flatten(),
        Dense(8),
        ReLU(),
        Dropout(0.1),
        Dense(classes, activation="softmax"),
    ], seed=seed)


def layout_model(seed=11, classes=6):
    """Conv kernels with every dimension different (3x2 and 2x3 kernels, 3 -> 5 -> 4 channels), so a
    kernel read in the wrong layout (HWIO vs the GPU's OHWI) cannot pass for the right one."""
    return hpcnn.Sequential([
        InputLayer(input_shape=[7, 6, 3]),
        Conv2D(5, (3, 2), padding="same", activation="relu"),
        MaxPooling2D(2),
        Conv2D(4, (2, 3), strides=(1, 2), padding="valid", activation="relu"),
        Flatten(),
        Dense(classes, activation="softmax"),
    ], seed=seed)


# ------------------------------------------------------------------ graphs (the functional API)
# Each builder returns an hpcnn.Model; GRAPHS[name] is the same graph for tests/support/reference.py, its
# inputs in the core's node order (which the tests check against node_inputs).
def residual_model(seed=5, classes=3):
    """A residual block: the stem's output feeds the block and the Add (two consumers)."""
    x = hpcnn.Input(shape=(6, 6, 3))
    s = Conv2D(4, 3, padding="same", activation="relu")(x)
    a = Conv2D(4, 3, padding="same", activation="relu")(s)
    a = Conv2D(4, 3, padding="same")(a)
    y = ReLU()(Add()([a, s]))
    out = Dense(classes, activation="softmax")(Flatten()(y))
    return hpcnn.Model(x, out, seed=seed, name="residual")


def concat_model(seed=6, classes=3):
    """Two branches of the stem side by side on the channel axis, then pooling."""
    x = hpcnn.Input(shape=(6, 6, 3))
    s = Conv2D(4, 3, padding="same", activation="relu")(x)
    a = Conv2D(3, 3, padding="same", activation="relu")(s)
    b = Conv2D(2, 1)(s)
    c = MaxPooling2D(2)(Concatenate()([a, b]))
    out = Dense(classes, activation="softmax")(Flatten()(c))
    return hpcnn.Model(x, out, seed=seed, name="concat")


def twice_model(seed=7, classes=3):
    """One tensor given twice to one layer (Add([s, s]), then Concatenate([s, a]) along the height
    axis): several contributions to one gradient from a single node."""
    x = hpcnn.Input(shape=(4, 4, 2))
    s = Conv2D(3, 3, padding="same", activation="relu")(x)
    a = Add()([s, s])
    c = Concatenate(axis=1)([s, a])
    d = Conv2D(2, 3, padding="same")(c)
    out = Dense(classes, activation="softmax")(Flatten()(d))
    return hpcnn.Model(x, out, seed=seed, name="twice")


def fanout_model(seed=8, classes=3):
    """The model's input read by two layers (its gradient is never needed), merged by Add. The
    Add's gradient reaches both: the second (b, backward first) masks its gradient in place for its
    fused ReLU, so the two must not share one buffer."""
    x = hpcnn.Input(shape=(5, 5, 2))
    a = Conv2D(3, 3, padding="same")(x)
    b = Conv2D(3, 1, activation="relu")(x)
    y = Add()([a, b])
    out = Dense(classes, activation="softmax")(Flatten()(y))
    return hpcnn.Model(x, out, seed=seed, name="fanout")


GRAPHS = {
    "residual": (residual_model, (6, 6, 3), [
        (("conv", 1, "same", True), [-1]), (("conv", 1, "same", True), [0]), (("conv", 1, "same", False), [1]),
        (("add",), [2, 0]), (("relu",), [3]), (("flatten",), [4]), (("dense", False), [5]), (("softmax",), [6])]),
    "concat": (concat_model, (6, 6, 3), [
        (("conv", 1, "same", True), [-1]), (("conv", 1, "same", True), [0]), (("conv", 1, "valid", False), [0]),
        (("concat", -1), [1, 2]), (("pool", 2, 2, "valid"), [3]), (("flatten",), [4]), (("dense", False), [5]),
        (("softmax",), [6])]),
    "twice": (twice_model, (4, 4, 2), [
        (("conv", 1, "same", True), [-1]), (("add",), [0, 0]), (("concat", 1), [0, 1]),
        (("conv", 1, "same", False), [2]), (("flatten",), [3]), (("dense", False), [4]), (("softmax",), [5])]),
    "fanout": (fanout_model, (5, 5, 2), [
        (("conv", 1, "same", False), [-1]), (("conv", 1, "valid", True), [-1]), (("add",), [0, 1]),
        (("flatten",), [2]), (("dense", False), [3]), (("softmax",), [4])]),
}


# ------------------------------------------------------------------ a ResNet basic block
def basic_block(x, filters, stride=1, kernel_regularizer=None):
    """He et al.'s basic block (ResNet v1, as the CIFAR ResNets use it): Conv-BN-ReLU-Conv-BN, plus
    the shortcut (the identity, or a 1x1 convolution with BN where the shape changes), Add, ReLU."""
    from hpcnn.layers import BatchNormalization
    y = Conv2D(filters, 3, strides=stride, padding="same", use_bias=False, kernel_regularizer=kernel_regularizer)(x)
    y = ReLU()(BatchNormalization()(y))  # a BN whose only reader is a ReLU: fused in the core
    y = Conv2D(filters, 3, padding="same", use_bias=False, kernel_regularizer=kernel_regularizer)(y)
    y = BatchNormalization()(y)
    shortcut = x
    if stride != 1 or x.shape[-1] != filters:
        shortcut = Conv2D(filters, 1, strides=stride, use_bias=False, kernel_regularizer=kernel_regularizer)(x)
        shortcut = BatchNormalization()(shortcut)
    return ReLU()(Add()([y, shortcut]))


def resnet_block_model(seed=4, classes=3, projection=True, kernel_regularizer=None, shape=(8, 8, 3)):
    """A stem (Conv-BN-ReLU), a block with the identity shortcut and (projection) a block that
    halves the size and doubles the channels (1x1 stride-2 shortcut), global average pooling, a
    softmax Dense: a ResNet-20 in miniature."""
    from hpcnn.layers import BatchNormalization, GlobalAveragePooling2D
    x = hpcnn.Input(shape=shape)
    y = ReLU()(BatchNormalization()(Conv2D(4, 3, padding="same", use_bias=False)(x)))
    y = basic_block(y, 4, 1, kernel_regularizer)
    if projection:
        y = basic_block(y, 8, 2, kernel_regularizer)
    out = Dense(classes, activation="softmax")(GlobalAveragePooling2D()(y))
    return hpcnn.Model(x, out, seed=seed, name="resnet_block")
