"""Writes the small Keras-saved files tests/python/formats/test_keras_fixtures.py loads, once, with real Keras:

- tf.keras 2 (Keras 2.x through TensorFlow, the `tf_keras` package): the legacy HDF5 model and
  weights files that TensorFlow 2 wrote before Keras 3 (what the MNIST seed's
  recognition_model.hdf5 is), for a small CNN and for the MNIST seed's classifier (Flatten,
  Dense, Dropout, Dense with logits, SparseCategoricalCrossentropy(from_logits=True));
- Keras 3 (jax backend): the small CNN as `.keras`, `.weights.h5` and legacy `.h5`;
- both: a small ResNet-style CNN with the layers of issue 13 (Rescaling, ZeroPadding2D, a strided
  Conv2D without bias, BatchNormalization with trained moving statistics, ReLU, AveragePooling2D,
  LeakyReLU, GlobalAveragePooling2D, ELU, Softmax) compiled with the other optimizers (tf.keras 2:
  RMSprop with momentum; Keras 3: AdamW on an ExponentialDecay schedule), as `.h5` (tf.keras 2) and
  `.keras` (Keras 3);
- Keras 3, functional API (`keras3_functional`, any backend): a ResNet basic block (Conv2D,
  BatchNormalization, ReLU, a 1x1 projection shortcut, Add, Concatenate,
  GlobalAveragePooling2D, Dense) as `.keras` and legacy `.h5`, with its predictions in
  expected_k3_func.npz (written by its own command so the other fixtures stay as they are);
  `tf2_functional`: the same block saved by tf.keras 2 as legacy `.h5` (expected_tfk2_func.npz).

expected.npz holds the inputs and each family's predictions. CI needs neither TensorFlow nor
Keras for those tests (tests/python/keras/test_keras_interop.py runs live Keras 3 where it is installed).

    # from the repository root (python -m finds tests.support there)
    # TensorFlow 2 with Keras 2 (a scratch venv: pip install tensorflow-cpu tf-keras h5py)
    TF_USE_LEGACY_KERAS=1 python -m tests.data.keras.make_fixtures tf2
    # Keras 3 (pip install keras 'jax[cpu]')
    KERAS_BACKEND=jax python -m tests.data.keras.make_fixtures keras3
    python -m tests.data.keras.make_fixtures keras3_functional
    TF_USE_LEGACY_KERAS=1 python -m tests.data.keras.make_fixtures tf2_functional
"""
import os
import sys

import numpy as np

from tests.support.keras_api_models import resnet_block

HERE = os.path.dirname(os.path.abspath(__file__))

RNG = np.random.default_rng(2024)
X_CNN = RNG.random((6, 8, 8, 3), dtype=np.float32)
X_MNIST = RNG.random((6, 6, 6), dtype=np.float32)
Y_CNN = np.eye(3, dtype=np.float32)[RNG.integers(0, 3, 16)]
Y_MNIST = RNG.integers(0, 3, 16)
TRAIN_CNN = RNG.random((16, 8, 8, 3), dtype=np.float32)
TRAIN_MNIST = RNG.random((16, 6, 6), dtype=np.float32)


def small_cnn(k):
    """The tutorial CNN's shape, small: conv/pool pairs, Flatten, Dense, Dropout, softmax."""
    L = k.layers
    return k.Sequential([
        L.InputLayer(input_shape=(8, 8, 3)) if k.__version__.startswith("2") else k.Input((8, 8, 3)),
        L.Conv2D(4, 3, padding="same", activation="relu"),
        L.MaxPooling2D(pool_size=[2, 2], strides=[2, 2], padding="same"),
        L.Conv2D(6, 3, padding="same", activation="relu"),
        L.MaxPooling2D(pool_size=[2, 2], strides=[2, 2], padding="same"),
        L.Flatten(),
        L.Dense(8, activation="relu"),
        L.Dropout(0.2),
        L.Dense(3, activation="softmax"),
    ])


def mnist_classifier(k):
    """The TensorFlow MNIST classifier of the seed's hpc.py, small (6x6 images, 3 classes)."""
    L = k.layers
    return k.Sequential([L.Flatten(input_shape=(6, 6)), L.Dense(5, activation="relu"), L.Dropout(0.2), L.Dense(3)])


def bn_cnn(k):
    """The layers a ResNet needs, small: its predictions depend on BatchNormalization's moving
    statistics (inference mode), so a file read without them, or in another order, predicts otherwise."""
    L = k.layers
    return k.Sequential([
        L.InputLayer(input_shape=(8, 8, 3)) if k.__version__.startswith("2") else k.Input((8, 8, 3)),
        L.Rescaling(2.0, offset=-1.0),
        L.ZeroPadding2D(1),
        L.Conv2D(6, 3, strides=2, use_bias=False),
        L.BatchNormalization(momentum=0.5),
        L.ReLU(),
        L.AveragePooling2D(2, padding="same"),
        L.Conv2D(5, 3, padding="same"),
        L.BatchNormalization(center=False, momentum=0.5),
        L.LeakyReLU(0.1),
        L.GlobalAveragePooling2D(),
        L.Dense(6),
        L.ELU(),
        L.Dense(3),
        L.Softmax(),
    ])


def fit_bn(k, model):
    """Two epochs, so the moving statistics move well away from their initial 0 and 1."""
    model.fit(TRAIN_CNN, Y_CNN.argmax(1), epochs=2, batch_size=8, verbose=0)
    return model.predict(X_CNN, verbose=0)


def save(name, arrays):
    path = os.path.join(HERE, "expected_" + name + ".npz")
    np.savez(path, **arrays)
    print("wrote", path)


def tf2():
    import tf_keras as k  # Keras 2 for TensorFlow 2.16+
    k.utils.set_random_seed(1)
    cnn = small_cnn(k)
    cnn.compile(optimizer=k.optimizers.Adam(learning_rate=0.001), loss="categorical_crossentropy", metrics=["accuracy"])
    cnn.fit(TRAIN_CNN, Y_CNN, epochs=1, batch_size=8, verbose=0)
    cnn.save(os.path.join(HERE, "tfk2_cnn.h5"))
    cnn.save_weights(os.path.join(HERE, "tfk2_cnn_weights.h5"))
    mnist = mnist_classifier(k)
    mnist.compile(optimizer="adam", loss=k.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    mnist.fit(TRAIN_MNIST, Y_MNIST, epochs=1, batch_size=8, verbose=0)
    mnist.save(os.path.join(HERE, "tfk2_recognition_model.hdf5"))
    bn = bn_cnn(k)
    bn.compile(optimizer=k.optimizers.RMSprop(learning_rate=0.01, momentum=0.9), loss="sparse_categorical_crossentropy",
               metrics=["accuracy"])
    bn_pred = fit_bn(k, bn)
    bn.save(os.path.join(HERE, "tfk2_bn.h5"))
    save("tfk2", {"x_cnn": X_CNN, "cnn": cnn.predict(X_CNN, verbose=0), "x_mnist": X_MNIST,
                  "mnist": mnist.predict(X_MNIST, verbose=0), "bn": bn_pred, "keras_version": np.array(k.__version__)})


def keras3():
    import keras as k
    k.utils.set_random_seed(1)
    cnn = small_cnn(k)
    cnn.compile(optimizer=k.optimizers.Adam(learning_rate=0.001), loss="categorical_crossentropy", metrics=["accuracy"])
    cnn.fit(TRAIN_CNN, Y_CNN, epochs=1, batch_size=8, verbose=0)
    cnn.save(os.path.join(HERE, "k3_cnn.keras"))
    cnn.save(os.path.join(HERE, "k3_cnn.h5"))
    cnn.save_weights(os.path.join(HERE, "k3_cnn.weights.h5"))
    bn = bn_cnn(k)
    schedule = k.optimizers.schedules.ExponentialDecay(0.01, decay_steps=10, decay_rate=0.9)
    bn.compile(optimizer=k.optimizers.AdamW(learning_rate=schedule, weight_decay=0.01),
               loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    bn_pred = fit_bn(k, bn)
    bn.save(os.path.join(HERE, "k3_bn.keras"))
    save("k3", {"x_cnn": X_CNN, "cnn": cnn.predict(X_CNN, verbose=0), "bn": bn_pred,
                "keras_version": np.array(k.__version__)})


def keras3_functional():
    import keras as k
    k.utils.set_random_seed(1)
    m = resnet_block(k)
    m.compile(optimizer=k.optimizers.Adam(learning_rate=0.001), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    pred = fit_bn(k, m)
    m.save(os.path.join(HERE, "k3_resblock.keras"))
    m.save(os.path.join(HERE, "k3_resblock.h5"))
    save("k3_func", {"x_cnn": X_CNN, "resblock": pred, "keras_version": np.array(k.__version__),
                     "backend": np.array(k.backend.backend())})


def tf2_functional():
    import tf_keras as k
    k.utils.set_random_seed(1)
    m = resnet_block(k)
    m.compile(optimizer=k.optimizers.Adam(learning_rate=0.001), loss="sparse_categorical_crossentropy",
              metrics=["accuracy"])
    pred = fit_bn(k, m)
    m.save(os.path.join(HERE, "tfk2_resblock.h5"))
    save("tfk2_func", {"x_cnn": X_CNN, "resblock": pred, "keras_version": np.array(k.__version__)})


if __name__ == "__main__":
    {"tf2": tf2, "keras3": keras3, "keras3_functional": keras3_functional,
     "tf2_functional": tf2_functional}[sys.argv[1]]()
