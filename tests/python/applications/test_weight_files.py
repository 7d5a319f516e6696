"""Keras' weight files as hpcnn finds and fetches them (hpcnn.applications.weight_files): Keras'
cache folder ($KERAS_HOME/models), its file names, URLs and checksums, atomic downloads, and the
offline error that names the file, the URL and the folder. Nothing here touches the network:
downloads come from file:// folders, and "offline" is an opener that fails."""
import hashlib
import json
import os
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from hpcnn.applications import imagenet_utils, resnet, vgg16, weight_files
from hpcnn.keras import applications as keras_applications


@pytest.fixture
def keras_home(tmp_path, monkeypatch):
    """An empty Keras home, no mirror, and no network: every urlopen fails as on a compute node."""
    home = tmp_path / "keras_home"
    home.mkdir()
    monkeypatch.setenv("KERAS_HOME", str(home))
    monkeypatch.delenv(weight_files.MIRROR_VARIABLE, raising=False)

    def offline(url, *args, **kwargs):
        if str(url).startswith("file:"):
            return real_urlopen(url, *args, **kwargs)
        raise urllib.error.URLError("[Errno -3] Temporary failure in name resolution")

    real_urlopen = urllib.request.urlopen
    monkeypatch.setattr(urllib.request, "urlopen", offline)
    return home


def md5(data: bytes) -> str:
    return hashlib.md5(data).hexdigest()


def test_cache_folder_is_keras_home_models(keras_home):
    assert weight_files.cache_folder() == os.path.join(str(keras_home), "models")


def test_a_cached_file_with_its_checksum_is_used_without_a_download(keras_home):
    (keras_home / "models").mkdir()
    (keras_home / "models" / "w.h5").write_bytes(b"weights")
    path = weight_files.get_file("w.h5", "https://example.invalid/w.h5", md5(b"weights"))
    assert path == str(keras_home / "models" / "w.h5")


def test_sha256_checksums_are_recognized_by_length(keras_home):
    (keras_home / "models").mkdir()
    (keras_home / "models" / "w.h5").write_bytes(b"weights")
    digest = hashlib.sha256(b"weights").hexdigest()
    assert weight_files.get_file("w.h5", "https://example.invalid/w.h5", digest).endswith("w.h5")


def test_download_from_a_mirror_is_checked_and_atomic(keras_home, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "w.h5").write_bytes(b"the weights")
    monkeypatch.setenv(weight_files.MIRROR_VARIABLE, mirror.as_uri())
    path = weight_files.get_file("w.h5", "https://example.invalid/w.h5", md5(b"the weights"), progress=False)
    assert Path(path).read_bytes() == b"the weights"
    assert sorted(os.listdir(keras_home / "models")) == ["w.h5"]  # no .part left


def test_a_download_with_another_checksum_keeps_nothing(keras_home, tmp_path, monkeypatch):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "w.h5").write_bytes(b"truncated")
    monkeypatch.setenv(weight_files.MIRROR_VARIABLE, mirror.as_uri())
    with pytest.raises(ValueError, match=r"has md5 [0-9a-f]{32}, expected 0{32} .*nothing was kept"):
        weight_files.get_file("w.h5", "https://example.invalid/w.h5", "0" * 32, progress=False)
    assert os.listdir(keras_home / "models") == []


def test_a_damaged_cached_file_is_downloaded_again(keras_home, tmp_path, monkeypatch):
    (keras_home / "models").mkdir()
    (keras_home / "models" / "w.h5").write_bytes(b"half")
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "w.h5").write_bytes(b"whole file")
    monkeypatch.setenv(weight_files.MIRROR_VARIABLE, mirror.as_uri())
    path = weight_files.get_file("w.h5", "https://example.invalid/w.h5", md5(b"whole file"), progress=False)
    assert Path(path).read_bytes() == b"whole file"


def test_offline_error_names_file_url_and_folder(keras_home):
    with pytest.raises(weight_files.WeightsUnavailable) as info:
        keras_applications.VGG16(weights="imagenet", include_top=False, input_shape=(32, 32, 3))
    e = info.value
    assert isinstance(e, FileNotFoundError)
    assert e.fname == "vgg16_weights_tf_dim_ordering_tf_kernels_notop.h5"
    assert e.url == vgg16.WEIGHTS_PATH_NO_TOP
    assert e.folder == str(keras_home / "models")
    text = str(e)
    for part in (e.fname, e.url, e.folder, "name resolution", "weights='/path/to/"):
        assert part in text


def test_offline_error_for_resnet50_with_the_top(keras_home):
    with pytest.raises(weight_files.WeightsUnavailable, match=r"resnet50_weights_tf_dim_ordering_tf_kernels\.h5 is "
                       r"not in '.*models' and cannot be downloaded from https://storage\.googleapis\.com/tensorflow/"
                       r"keras-applications/resnet/resnet50_weights_tf_dim_ordering_tf_kernels\.h5"):
        resnet.ResNet50(weights="imagenet")


def test_offline_error_says_the_cached_copy_is_damaged(keras_home):
    (keras_home / "models").mkdir()
    (keras_home / "models" / "w.h5").write_bytes(b"half")
    with pytest.raises(weight_files.WeightsUnavailable, match="does not have Keras' checksum 0{32} "
                                                              r"\(damaged or incomplete\)"):
        weight_files.get_file("w.h5", "https://example.invalid/w.h5", "0" * 32, progress=False)


def test_an_unreachable_mirror_is_named(keras_home, tmp_path, monkeypatch):
    monkeypatch.setenv(weight_files.MIRROR_VARIABLE, (tmp_path / "nowhere").as_uri())
    with pytest.raises(weight_files.WeightsUnavailable, match=r"cannot be downloaded from file://.*nowhere/w\.h5"):
        weight_files.get_file("w.h5", "https://example.invalid/w.h5", "0" * 32, progress=False)


def test_file_name_with_a_folder_is_refused(keras_home):
    with pytest.raises(ValueError, match="fname must be a file name without a folder"):
        weight_files.get_file("a/w.h5", "https://example.invalid/w.h5")


# ---------------------------------------------------------------------- decode_predictions
@pytest.fixture
def class_index_file(keras_home, monkeypatch):
    """A stand-in for Keras' imagenet_class_index.json in the cache, with its own checksum."""
    index = {str(i): [f"n{i:08d}", f"class_{i}"] for i in range(1000)}
    data = json.dumps(index).encode()
    (keras_home / "models").mkdir()
    (keras_home / "models" / imagenet_utils.CLASS_INDEX_FILE).write_bytes(data)
    monkeypatch.setattr(imagenet_utils, "CLASS_INDEX_HASH", md5(data))
    monkeypatch.setattr(imagenet_utils, "_class_index", None)
    yield index
    imagenet_utils._class_index = None


def test_decode_predictions_top_classes_in_order(class_index_file):
    preds = np.zeros((2, 1000), np.float32)
    preds[0, [3, 7, 999]] = [0.2, 0.5, 0.3]
    preds[1, 42] = 1.0
    out = keras_applications.vgg16.decode_predictions(preds, top=3)
    assert [r[:2] for r in out[0]] == [("n00000007", "class_7"), ("n00000999", "class_999"), ("n00000003", "class_3")]
    assert out[0][0][2] == pytest.approx(0.5)
    assert out[1][0][:2] == ("n00000042", "class_42") and len(out[1]) == 3


def test_decode_predictions_needs_1000_classes(class_index_file):
    with pytest.raises(ValueError, match=r"shape \(samples, 1000\)\); got shape \(2, 10\)"):
        resnet.decode_predictions(np.zeros((2, 10)))


def test_decode_predictions_offline_names_the_class_index(keras_home, monkeypatch):
    monkeypatch.setattr(imagenet_utils, "_class_index", None)
    with pytest.raises(weight_files.WeightsUnavailable, match="imagenet_class_index.json is not in .*"
                                                              "https://storage.googleapis.com/download.tensorflow.org/"
                                                              "data/imagenet_class_index.json"):
        imagenet_utils.decode_predictions(np.zeros((1, 1000)))


def test_offline_error_for_mobilenetv2_names_keras_file(keras_home):
    with pytest.warns(UserWarning, match=r"input_shape \(64, 64, 3\) .* the weights for 224x224 are loaded"):
        with pytest.raises(weight_files.WeightsUnavailable) as info:
            keras_applications.MobileNetV2(weights="imagenet", alpha=0.35, include_top=False, input_shape=(64, 64, 3))
    assert info.value.fname == "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_224_no_top.h5"
    assert info.value.url == ("https://storage.googleapis.com/tensorflow/keras-applications/mobilenet_v2/"
                              "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_0.35_224_no_top.h5")
