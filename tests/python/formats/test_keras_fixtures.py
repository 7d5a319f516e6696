"""Files saved by real Keras, committed in tests/data/keras (tests/data/keras/make_fixtures.py wrote
them once): tf.keras 2 legacy HDF5 model and weights files (what TensorFlow 2 wrote before Keras 3,
as the MNIST seed's recognition_model.hdf5) and Keras 3 `.keras`, `.weights.h5` and legacy `.h5`.
hpcnn loads each and predicts what Keras predicted (<= 1e-5), compiled as Keras compiled it."""

import numpy as np
import pytest

from hpcnn.models import clone_model, load_model
from tests.support import paths

DATA = paths.KERAS_DATA
TFK2 = np.load(DATA / "expected_tfk2.npz")
K3 = np.load(DATA / "expected_k3.npz")


def close(model, x, expected):
    got = model.predict(x)
    assert got.shape == expected.shape
    assert np.abs(got - expected).max() <= 1e-5


@pytest.mark.parametrize("name, expected", [("tfk2_cnn.h5", TFK2), ("k3_cnn.h5", K3), ("k3_cnn.keras", K3)])
def test_keras_saved_cnn_models_load_and_predict_the_same(name, expected):
    m = load_model(DATA / name)
    close(m, expected["x_cnn"], expected["cnn"])
    assert [type(layer).__name__ for layer in m.layers] == ["Conv2D", "MaxPooling2D", "Conv2D", "MaxPooling2D",
                                                            "Flatten", "Dense", "Dropout", "Dense"]
    assert m.input_shape == (None, 8, 8, 3)
    assert type(m.optimizer).__name__ == "Adam" and m.optimizer.learning_rate == pytest.approx(0.001)
    assert m.compile_settings["loss"] == "categorical_crossentropy" and m.compile_settings["accuracy"]
    # compiled as Keras compiled it: evaluate and fit run
    y = np.eye(3, dtype=np.float32)[[0, 1, 2, 0, 1, 2]]
    loss, acc = m.evaluate(expected["x_cnn"], y, verbose=0)
    assert np.isfinite(loss) and 0 <= acc <= 1
    m.fit(expected["x_cnn"], y, epochs=1, verbose=0)


@pytest.mark.parametrize("weights, model, expected", [("tfk2_cnn_weights.h5", "tfk2_cnn.h5", TFK2),
                                                      ("k3_cnn.weights.h5", "k3_cnn.keras", K3),
                                                      ("k3_cnn.h5", "k3_cnn.keras", K3)])
def test_keras_saved_weights_load_into_the_same_architecture(weights, model, expected):
    fresh = clone_model(load_model(DATA / model, compile=False))  # same layers, new weights
    assert not np.allclose(fresh.predict(expected["x_cnn"]), expected["cnn"], atol=1e-5)
    fresh.load_weights(DATA / weights)
    close(fresh, expected["x_cnn"], expected["cnn"])


def test_the_mnist_seeds_recognition_model_hdf5():
    """tf.keras 2's model.save('recognition_model.hdf5') of the TensorFlow MNIST classifier: Flatten
    on 2-D images, Dense, Dropout, logits, SparseCategoricalCrossentropy(from_logits=True)."""
    m = load_model(DATA / "tfk2_recognition_model.hdf5")
    close(m, TFK2["x_mnist"], TFK2["mnist"])
    assert m.input_shape == (None, 6, 6)
    assert m.compile_settings["loss"] == "sparse_categorical_crossentropy" and m.compile_settings["from_logits"] is True


def test_hpcnn_round_trips_keras_files_it_loaded(tmp_path):
    """Loaded from Keras, saved by hpcnn, loaded again: the same predictions."""
    m = load_model(DATA / "tfk2_cnn.h5")
    for name in ("again.h5", "again.keras"):
        m.save(tmp_path / name)
        close(load_model(tmp_path / name), TFK2["x_cnn"], TFK2["cnn"])


BN_LAYERS = ["Rescaling", "ZeroPadding2D", "Conv2D", "BatchNormalization", "ReLU", "AveragePooling2D", "Conv2D",
             "BatchNormalization", "LeakyReLU", "GlobalAveragePooling2D", "Dense", "ELU", "Dense", "Softmax"]


@pytest.mark.parametrize("name, expected", [("tfk2_bn.h5", TFK2), ("k3_bn.keras", K3)])
def test_keras_saved_models_with_batch_normalization(tmp_path, name, expected):
    """The ResNet layers, trained by Keras (moving statistics away from 0 and 1), predict the same in
    hpcnn (inference mode: the moving statistics), compiled with Keras' optimizer and its config."""
    m = load_model(DATA / name)
    assert [type(layer).__name__ for layer in m.layers] == BN_LAYERS
    close(m, expected["x_cnn"], expected["bn"])
    w = dict(zip(m.weight_names(), m.get_weights()))
    assert not np.allclose(w["batch_normalization/moving_mean"], 0)
    assert "batch_normalization_1/beta" not in w and m.layers[7].center is False
    cfg = m.optimizer.get_config()
    if name.startswith("tfk2"):
        assert type(m.optimizer).__name__ == "RMSprop" and cfg["momentum"] == pytest.approx(0.9)
        assert cfg["learning_rate"] == pytest.approx(0.01)
    else:
        assert type(m.optimizer).__name__ == "AdamW" and cfg["weight_decay"] == pytest.approx(0.01)
        assert cfg["learning_rate"]["class_name"] == "ExponentialDecay"
        assert cfg["learning_rate"]["config"]["decay_steps"] == 10
    assert m.compile_settings["loss"] == "sparse_categorical_crossentropy"
    for again in ("again.h5", "again.keras"):  # and back out: the same predictions
        m.save(tmp_path / again)
        close(load_model(tmp_path / again), expected["x_cnn"], expected["bn"])
    m.fit(expected["x_cnn"], np.array([0, 1, 2, 0, 1, 2]), epochs=1, verbose=0)
