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


CASES = {
    # id: (builder, keyword arguments, preprocess mode)
    "vgg16_notop_avg": ("VGG16", dict(include_top=False, input_shape=(32, 32, 3), pooling="avg"), "caffe"),
    "vgg16_top": ("VGG16", dict(include_top=True, input_shape=(32, 32, 3), classes=7, classifier_activation=None),
                  "caffe"),
    "resnet50_notop": ("ResNet50", dict(include_top=False, input_shape=(32, 32, 3)), "caffe"),
    "resnet50_top": ("ResNet50", dict(include_top=True, input_shape=(64, 64, 3), classes=10,
                                      classifier_activation=None), "caffe"),
}


@pytest.fixture(scope="module", params=sorted(CASES))
def pair(request, tmp_path_factory):
    """(case, Keras' model, its weights file in the download layout, the images, Keras' output)."""
    builder, kwargs, mode = CASES[request.param]
    folder = tmp_path_factory.mktemp(request.param)
    km = with_varied_statistics(getattr(keras.applications, builder)(weights=None, **kwargs))
    path = str(folder / f"{request.param}.h5")
    keras_download_layout(km, path)
    x = applications.imagenet_utils.preprocess_input(images(kwargs["input_shape"]), mode=mode)
    return request.param, km, path, x, np.asarray(km.predict(x, verbose=0)), folder


def test_keras_download_layout_loads_and_predicts_the_same(pair):
    case, km, path, x, ky, _ = pair
    builder, kwargs, _ = CASES[case]
    hm = getattr(applications, builder)(weights=path, **kwargs)
    assert names(hm) == names(km)
    assert hm.count_params() == km.count_params()
    hy = hm.predict(x, verbose=0)
    assert hy.shape == ky.shape
    assert relative_error(hy, ky) <= TOL


def test_weights_in_keras_order_and_names(pair):
    case, km, path, _, _, _ = pair
    builder, kwargs, _ = CASES[case]
    hm = getattr(applications, builder)(weights=path, **kwargs)
    assert hm.weight_names() == [f"{layer.name}/{w.name.split('/')[-1]}" for layer in km.layers
                                 for w in layer.weights]
    for a, b in zip(hm.get_weights(), km.get_weights()):
        np.testing.assert_array_equal(a, b)
    kt = sum(int(np.prod(w.shape)) for w in km.trainable_weights)
    assert sum(int(np.prod(w.shape)) for w in hm.trainable_weights) == kt


def test_hpcnn_saves_load_in_keras(pair):
    case, km, path, x, ky, folder = pair
    builder, kwargs, _ = CASES[case]
    if case == "vgg16_top":
        pytest.skip("the other three cases cover the saves; VGG16's 20M-weight top only adds time")
    hm = getattr(applications, builder)(weights=path, **kwargs)
    hm.save(str(folder / "h.keras"))
    hm.save_weights(str(folder / "h_legacy.h5"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        back = keras.models.load_model(str(folder / "h.keras"))
    assert relative_error(back.predict(x, verbose=0), ky) <= TOL
    fresh = getattr(keras.applications, builder)(weights=None, **kwargs)
    fresh.load_weights(str(folder / "h_legacy.h5"))  # Keras' legacy loader, by topology
    assert relative_error(fresh.predict(x, verbose=0), ky) <= TOL


def test_keras_model_files_load_in_hpcnn(pair):
    case, km, path, x, ky, folder = pair
    if case not in ("resnet50_notop", "vgg16_notop_avg"):
        pytest.skip("two cases cover Keras' whole-model files")
    km.save(str(folder / "k.keras"))
    km.save(str(folder / "k.h5"))
    for name in ("k.keras", "k.h5"):
        hm = hpcnn.models.load_model(str(folder / name))
        assert names(hm) == names(km)
        assert relative_error(hm.predict(x, verbose=0), ky) <= TOL, name


def test_a_file_of_another_architecture_names_the_layer(pair, tmp_path):
    case, km, path, _, _, _ = pair
    if case != "resnet50_notop":
        pytest.skip("one case is enough")
    with pytest.raises(ValueError, match=r"VGG16 \(vgg16, input \(32, 32, 3\)\): load_weights: .* does not fit this "
                                         r"model: the file holds weights for 106 layer\(s\), the model has 13 .*no layer name in common: "
                                         r"another architecture\? file: conv1_conv, conv1_bn"):
        applications.VGG16(weights=path, include_top=False, input_shape=(32, 32, 3))


def test_a_top_file_for_a_model_without_top_says_what_differs(pair):
    case, km, path, _, _, _ = pair
    if case != "resnet50_top":
        pytest.skip("one case is enough")
    with pytest.raises(ValueError, match=r"ResNet50 .*the file holds weights for 107 layer\(s\), the model has 106 layer\(s\) "
                                         r"with weights \(only in the file: predictions\)"):
        applications.ResNet50(weights=path, include_top=False, input_shape=(64, 64, 3))
    with pytest.raises(ValueError, match=r"layer 'predictions' \(Dense\) kernel has shape \(2048, 10\) in the file, "
                                         r"the model needs \(2048, 5\)"):
        applications.ResNet50(weights=path, include_top=True, input_shape=(64, 64, 3), classes=5,
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
