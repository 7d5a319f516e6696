"""Model builders written against the Keras API alone (`k.Input`, `k.layers`, `k.Model`), so one
function builds the same architecture in Keras 3, tf.keras 2 and hpcnn (pass `keras`, `tf_keras` or
`hpcnn` as `k`). Imports neither Keras nor hpcnn: tests/data/keras/make_fixtures.py runs it in a
scratch venv that has only TensorFlow or Keras."""


def resnet_block(k, **model_kwargs):
    """A functional model: a ResNet basic block (two conv/BN, a strided 1x1 projection shortcut,
    Add) followed by a Concatenate of two branches, global pooling and a softmax Dense. The
    architecture of the committed fixtures k3_resblock.* and tfk2_resblock.h5; `model_kwargs` go to
    `k.Model` (hpcnn's `seed`)."""
    L = k.layers
    x_in = k.Input((8, 8, 3))
    x = L.Conv2D(4, 3, padding="same", use_bias=False)(x_in)
    x = L.BatchNormalization(momentum=0.5)(x)
    x = L.ReLU()(x)
    y = L.Conv2D(6, 3, strides=2, padding="same", use_bias=False)(x)
    y = L.BatchNormalization(momentum=0.5)(y)
    y = L.Activation("relu")(y)
    y = L.Conv2D(6, 3, padding="same", use_bias=False)(y)
    y = L.BatchNormalization(momentum=0.5)(y)
    shortcut = L.Conv2D(6, 1, strides=2, use_bias=False)(x)
    shortcut = L.BatchNormalization(momentum=0.5)(shortcut)
    z = L.ReLU()(L.Add()([y, shortcut]))
    branch = L.Conv2D(2, 1, activation="relu")(z)
    z = L.Concatenate()([z, branch])
    z = L.GlobalAveragePooling2D()(z)
    out = L.Dense(3, activation="softmax")(z)
    return k.Model(x_in, out, name="resnet_block", **model_kwargs)
