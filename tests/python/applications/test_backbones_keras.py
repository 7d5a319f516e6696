"""The ImageNet backbones against live Keras 3.15 (jax CPU): Keras builds each with weights=None,
saves its weights in the layout of the files Keras downloads (legacy HDF5: layer_names,
weight_names), and hpcnn's model loads that file by topology and predicts the same (relative 1e-4
on the logits), with and without the top; a .keras and a legacy .h5 of the model saved by Keras
load in hpcnn, and hpcnn's saves load in Keras. Small inputs keep it cheap."""
import os
import warnings

import numpy as np
import pytest

from tests.support import live_keras

keras = live_keras.import_keras()
pytestmark = [pytest.mark.skipif(keras is None, reason=live_keras.REASON),
              pytest.mark.filterwarnings("ignore:.*HDF5 file via `model.save\\(\\)`.*:UserWarning")]

import hpcnn  # noqa: E402
from hpcnn.keras import applications  # noqa: E402

TOL = 1e-4


def keras_download_layout(model, path):
    """Keras' model weights written as the downloaded ImageNet files are: legacy HDF5 by layer."""
    import h5py
    from keras.src.legacy.saving import legacy_h5_format
    with h5py.File(path, "w") as f:
        legacy_h5_format.save_weights_to_hdf5_group(f, model)


def with_varied_statistics(model, seed=0):
    """Keras' fresh BatchNormalization has mean 0 and variance 1: other values make the comparison
    see that hpcnn uses each of the four weights where Keras does."""
    rng = np.random.default_rng(seed)
    model.set_weights([rng.uniform(0.5, 1.5, w.shape).astype(np.float32) if w.ndim == 1 else w
                       for w in model.get_weights()])
    return model


def images(shape, n=2, seed=1):
    return np.random.default_rng(seed).uniform(0, 255, (n, *shape)).astype(np.float32)


def names(model):
    """The layers' names but the input's (Keras numbers its input layers across models)."""
    return [layer.name for layer in model.layers[1:]]


def relative_error(a, b):
    return float(np.abs(np.asarray(a) - np.asarray(b)).max() / max(np.abs(np.asarray(b)).max(), 1e-12))


# family: (builder, keyword arguments of the model with its top, preprocess mode, the last layer
# of the model without its top). Keras builds each family once (with its top, logits); the model
# without the top is its sub-model up to that layer (the same weights, saved as the "notop" files are).
FAMILIES = {
    "vgg16": ("VGG16", dict(input_shape=(32, 32, 3), classes=7), "caffe", "block5_pool"),
    "resnet50": ("ResNet50", dict(input_shape=(32, 32, 3), classes=10), "caffe", "conv5_block3_out"),
    "mobilenetv2": ("MobileNetV2", dict(input_shape=(64, 64, 3), classes=10, alpha=0.35), "tf", "out_relu"),
}
# case: (family, include_top, pooling without the top)
CASES = {"vgg16_top": ("vgg16", True, None), "vgg16_notop_avg": ("vgg16", False, "avg"),
         "resnet50_top": ("resnet50", True, None), "resnet50_notop": ("resnet50", False, None),
         "mobilenetv2_top": ("mobilenetv2", True, None), "mobilenetv2_notop_max": ("mobilenetv2", False, "max")}
_KERAS_MODELS = {}


def keras_family(family):
    """Keras' model of the family (built once per test session: Keras' builds take seconds)."""
    if family not in _KERAS_MODELS:
        builder, kwargs, _, _ = FAMILIES[family]
        _KERAS_MODELS[family] = with_varied_statistics(
            getattr(keras.applications, builder)(weights=None, classifier_activation=None, **kwargs))
    return _KERAS_MODELS[family]


def case_kwargs(case):
    """The hpcnn builder's name and keyword arguments of a case."""
    family, top, pooling = CASES[case]
    builder, kwargs, _, _ = FAMILIES[family]
    kwargs = dict(kwargs, include_top=top)
    if top:
        kwargs["classifier_activation"] = None
    else:
        kwargs.pop("classes")
        kwargs["pooling"] = pooling
    return builder, kwargs


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    """prepared(case) -> (case, Keras' model, its weights file in the download layout, the images,
    Keras' output, a folder), made once per case."""
    made = {}

    def make(case):
        if case not in made:
            family, top, pooling = CASES[case]
            _, kwargs, mode, last = FAMILIES[family]
            folder = tmp_path_factory.mktemp(case)
            km = keras_family(family)
            if not top:
                km = keras.Model(km.inputs, km.get_layer(last).output)
            path = str(folder / f"{case}.h5")
            keras_download_layout(km, path)
            x = applications.imagenet_utils.preprocess_input(images(kwargs["input_shape"]), mode=mode)
            ky = np.asarray(km.predict(x, verbose=0))
            if pooling is not None:
                ky = ky.mean(axis=(1, 2)) if pooling == "avg" else ky.max(axis=(1, 2))
            made[case] = (case, km, path, x, ky, folder)
        return made[case]
    return make


@pytest.mark.parametrize("case", sorted(CASES))
def test_keras_download_layout_loads_and_predicts_the_same(prepared, case):
    case, km, path, x, ky, _ = prepared(case)
    builder, kwargs = case_kwargs(case)
    hm = getattr(applications, builder)(weights=path, **kwargs)
    assert names(hm)[:len(names(km))] == names(km)  # (and a pooling layer after them)
    assert hm.count_params() == km.count_params()
    hy = hm.predict(x, verbose=0)
    assert hy.shape == ky.shape
    assert relative_error(hy, ky) <= TOL


@pytest.mark.parametrize("case", sorted(CASES))
def test_weights_in_keras_order_and_names(prepared, case):
    case, km, path, _, _, _ = prepared(case)
    builder, kwargs = case_kwargs(case)
    hm = getattr(applications, builder)(weights=path, **kwargs)
    assert hm.weight_names() == [f"{layer.name}/{w.name.split('/')[-1]}" for layer in km.layers
                                 for w in layer.weights]
    for a, b in zip(hm.get_weights(), km.get_weights()):
        np.testing.assert_array_equal(a, b)
    kt = sum(int(np.prod(w.shape)) for w in km.trainable_weights)
    assert sum(int(np.prod(w.shape)) for w in hm.trainable_weights) == kt


@pytest.mark.parametrize("case", ["mobilenetv2_top", "resnet50_notop"])
def test_hpcnn_saves_load_in_keras(prepared, case):
    case, km, path, x, ky, folder = prepared(case)
    builder, kwargs = case_kwargs(case)
    hm = getattr(applications, builder)(weights=path, **kwargs)
    hm.save(str(folder / "h.keras"))
    hm.save_weights(str(folder / "h_legacy.h5"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = keras.models.load_model(str(folder / "h.keras"))
    assert relative_error(back.predict(x, verbose=0), ky) <= TOL
    km.set_weights([np.zeros_like(w) for w in km.get_weights()])
    km.load_weights(str(folder / "h_legacy.h5"))  # Keras' legacy loader, by topology
    assert relative_error(km.predict(x, verbose=0), ky) <= TOL


@pytest.mark.parametrize("case", ["mobilenetv2_top", "resnet50_notop"])
def test_keras_model_files_load_in_hpcnn(prepared, case):
    case, km, path, x, ky, folder = prepared(case)
    km.save(str(folder / "k.keras"))
    km.save(str(folder / "k.h5"))
    for name in ("k.keras", "k.h5"):
        hm = hpcnn.models.load_model(str(folder / name))
        assert names(hm) == names(km)
        assert relative_error(hm.predict(x, verbose=0), ky) <= TOL, name


def test_a_file_of_another_architecture_names_the_layer(prepared):
    case, km, path, _, _, _ = prepared("resnet50_notop")
    with pytest.raises(ValueError, match=r"VGG16 \(vgg16, input \(32, 32, 3\)\): load_weights: .* does not fit this "
                                         r"model: the file holds weights for 106 layer\(s\), the model has 13 .*no layer name in common: "
                                         r"another architecture\? file: conv1_conv, conv1_bn"):
        applications.VGG16(weights=path, include_top=False, input_shape=(32, 32, 3))


def test_a_top_file_for_a_model_without_top_says_what_differs(prepared):
    case, km, path, _, _, _ = prepared("resnet50_top")
    with pytest.raises(ValueError, match=r"ResNet50 .*the file holds weights for 107 layer\(s\), the model has 106 layer\(s\) "
                                         r"with weights \(only in the file: predictions\)"):
        applications.ResNet50(weights=path, include_top=False, input_shape=(32, 32, 3))
    with pytest.raises(ValueError, match=r"layer 'predictions' \(Dense\) kernel has shape \(2048, 10\) in the file, "
                                         r"the model needs \(2048, 5\)"):
        applications.ResNet50(weights=path, include_top=True, input_shape=(32, 32, 3), classes=5,
                              classifier_activation=None)


@pytest.mark.parametrize("mode", ["caffe", "tf", "torch"])
@pytest.mark.parametrize("ndim", [3, 4])
def test_preprocess_input_as_keras(mode, ndim):
    from keras.src.applications import imagenet_utils as keras_utils
    x = images((5, 4, 3), n=2)[0 if ndim == 3 else slice(None)]
    want = keras_utils.preprocess_input(x.copy(), mode=mode)
    got = applications.imagenet_utils.preprocess_input(x.copy(), mode=mode)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-5)
    assert got.dtype == np.float32


def test_family_preprocessing_modes():
    x = images((4, 4, 3), n=1)
    np.testing.assert_allclose(applications.vgg16.preprocess_input(x.copy()),
                               keras.applications.vgg16.preprocess_input(x.copy()), rtol=1e-6)
    np.testing.assert_allclose(applications.resnet50.preprocess_input(x.copy()),
                               keras.applications.resnet50.preprocess_input(x.copy()), rtol=1e-6)
    uint8 = np.full((1, 2, 2, 3), 255, np.uint8)
    out = applications.imagenet_utils.preprocess_input(uint8, mode="tf")
    assert out.dtype == np.float32 and np.all(out == 1.0)
