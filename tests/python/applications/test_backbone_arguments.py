"""The backbones' arguments as Keras checks them, each bad value refused with a message naming it
(no Keras needed: nothing is built past the checks, or only small models)."""
import numpy as np
import pytest

from hpcnn.applications import imagenet_utils
from hpcnn.keras import applications


@pytest.mark.parametrize("builder", ["VGG16", "ResNet50"])
def test_imagenet_with_top_needs_1000_classes(builder):
    with pytest.raises(ValueError, match=rf"{builder}: with weights='imagenet' and include_top=True, classes must be "
                                         r"1000, got classes=10"):
        getattr(applications, builder)(weights="imagenet", classes=10)


@pytest.mark.parametrize("builder", ["VGG16", "ResNet50"])
def test_imagenet_with_top_needs_224(builder):
    with pytest.raises(ValueError, match=rf"{builder}: with include_top=True and weights='imagenet', input_shape must "
                                         r"be \(224, 224, 3\), got \(64, 64, 3\)"):
        getattr(applications, builder)(weights="imagenet", input_shape=(64, 64, 3))


def test_bad_pooling():
    with pytest.raises(ValueError, match=r"ResNet50: pooling must be None, 'avg' or 'max', got 'mean'"):
        applications.ResNet50(weights=None, include_top=False, pooling="mean")


def test_bad_weights():
    with pytest.raises(ValueError, match=r"VGG16: weights must be None .*'imagenet' .*or the path to a weights file; "
                                         r"got 3"):
        applications.VGG16(weights=3)


def test_missing_weights_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothere.h5"):
        applications.VGG16(weights=str(tmp_path / "nothere.h5"), include_top=False, input_shape=(32, 32, 3))


def test_small_input_refused():
    with pytest.raises(ValueError, match=r"VGG16: input size must be at least 32x32, got input_shape=\(16, 16, 3\)"):
        applications.VGG16(weights=None, include_top=False, input_shape=(16, 16, 3))


def test_open_dimensions_refused():
    with pytest.raises(ValueError, match=r"input_shape \(None, None, 3\) has an open dimension; hpcnn's models have "
                                         r"a fixed input shape"):
        applications.ResNet50(weights=None, include_top=False, input_shape=(None, None, 3))


def test_imagenet_needs_three_channels():
    with pytest.raises(ValueError, match=r"ImageNet weights need 3 input channels, got input_shape=\(64, 64, 1\)"):
        applications.ResNet50(weights="imagenet", include_top=False, input_shape=(64, 64, 1))


def test_unusual_channels_warn():
    with pytest.warns(UserWarning, match=r"usually expects 1 or 3 input channels, got input_shape=\(32, 32, 5\)"):
        applications.VGG16(weights=None, include_top=False, input_shape=(32, 32, 5))


def test_classifier_activation_with_pretrained_weights(tmp_path):
    with pytest.raises(ValueError, match=r"only classifier_activation='softmax' or None may be used with pretrained "
                                         r"weights, got 'sigmoid'"):
        applications.VGG16(weights=str(tmp_path / "w.h5"), input_shape=(32, 32, 3), classes=10,
                           classifier_activation="sigmoid")


def test_default_input_shape_and_structure():
    m = applications.VGG16(weights=None, include_top=False)
    assert m.sample_shape == (224, 224, 3) and m.name == "vgg16"
    assert m.count_params() == 14714688  # Keras' VGG16(include_top=False) has the same


def test_input_tensor_after_augmentation():
    import hpcnn
    inputs = hpcnn.Input(shape=(32, 32, 3))
    x = hpcnn.layers.Rescaling(1.0 / 255)(inputs)
    m = applications.ResNet50(weights=None, include_top=False, input_tensor=x, pooling="avg")
    assert m.layers[1].name.startswith("rescaling") and m.output_shape == (None, 2048)


@pytest.mark.parametrize("bad, message", [
    (dict(mode="bgr"), r"mode must be one of 'caffe', 'tf' or 'torch', got 'bgr'"),
    (dict(data_format="nhwc"), r"data_format must be 'channels_first' or 'channels_last', got 'nhwc'"),
])
def test_preprocess_input_bad_arguments(bad, message):
    with pytest.raises(ValueError, match=message):
        imagenet_utils.preprocess_input(np.zeros((1, 2, 2, 3)), **bad)


def test_preprocess_input_bad_shapes():
    with pytest.raises(ValueError, match=r"expected one image \(3D\) or a batch \(4D\), got shape \(2, 3\)"):
        imagenet_utils.preprocess_input(np.zeros((2, 3)))
    with pytest.raises(ValueError, match=r"expected 3 color channels on axis 3 \(channels_last\), got shape "
                                         r"\(1, 2, 2, 4\)"):
        imagenet_utils.preprocess_input(np.zeros((1, 2, 2, 4)))


def test_preprocess_input_channels_first():
    x = np.full((3, 2, 2), 100.0, np.float32)
    x[0] = 10.0  # R
    out = imagenet_utils.preprocess_input(x, data_format="channels_first")
    np.testing.assert_allclose(out[2], 10.0 - 123.68, rtol=1e-6)  # R became the last channel (BGR)
    np.testing.assert_allclose(out[0], 100.0 - 103.939, rtol=1e-6)


def test_preprocess_input_on_a_model_tensor():
    """TensorFlow's transfer-learning tutorial calls preprocess_input on the Input tensor."""
    import hpcnn
    inputs = hpcnn.Input(shape=(4, 4, 3))
    for mode in ("tf", "torch"):
        model = hpcnn.Model(inputs, imagenet_utils.preprocess_input(inputs, mode=mode))
        x = np.random.default_rng(0).uniform(0, 255, (2, 4, 4, 3)).astype(np.float32)
        np.testing.assert_allclose(model.predict(x, verbose=0), imagenet_utils.preprocess_input(x.copy(), mode=mode),
                                   rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match=r"'caffe' mode .*reverses the color channels .*call it on the NumPy arrays"):
        applications.vgg16.preprocess_input(inputs)


def test_mobilenetv2_imagenet_alphas():
    with pytest.raises(ValueError, match=r"MobileNetV2: with weights='imagenet', alpha must be one of 0.35, 0.50, "
                                         r"0.75, 1.0, 1.3 or 1.4, got alpha=0.6"):
        applications.MobileNetV2(weights="imagenet", alpha=0.6, include_top=False, input_shape=(96, 96, 3))
    with pytest.raises(ValueError, match=r"MobileNetV2: Invalid value for argument `alpha`"):
        applications.MobileNetV2(weights=None, alpha=0)


def test_mobilenetv2_names_and_sizes():
    m = applications.MobileNetV2(weights=None, alpha=0.35, include_top=False, input_shape=(96, 96, 3))
    assert m.name == "mobilenetv2_0.35_96" and m.output_shape == (None, 3, 3, 1280)
    m = applications.MobileNetV2(weights=None, alpha=1.4, input_shape=(64, 64, 3), classes=3)
    assert m.name == "mobilenetv2_1.40_64" and m.get_layer("Conv_1").filters == 1792
    assert m.count_params() == 4369091  # Keras 3.15's MobileNetV2(alpha=1.4, input_shape=(64, 64, 3), classes=3)
