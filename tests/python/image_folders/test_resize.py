"""The resize of image_dataset_from_directory: Keras' crop/pad geometry, and, where TensorFlow is
installed, tf.image.resize itself and Keras' whole function on real photos (the C++ function
against a float64 reference: tests/core/data/test_image_resize.py)."""
import numpy as np
import pytest

from tests.support import image_folders as support

from hpcnn.data import image_dataset_from_directory
from hpcnn.image_folders import resize


SHAPES = [((37, 53), (16, 20)), ((12, 9), (30, 31)), ((5, 5), (5, 5)), ((64, 48), (7, 50))]


def test_crop_and_pad_geometry():
    img = np.zeros((40, 100, 1), np.uint8)
    img[:, 30:70] = 255  # the centre 40x40 square is white
    crop = resize.smart_resize(img, (10, 10), "nearest")
    assert crop.min() == 255  # the centred square crop
    pad = resize.resize_with_pad(np.full((40, 100, 1), 200, np.uint8), (20, 20), "bilinear")
    assert pad.shape == (20, 20, 1) and pad[:6].max() == 0 and pad[14:].max() == 0 and pad[6:14].min() == 200


def test_against_tensorflow_resize(tmp_path):
    rng = np.random.default_rng(1)
    imgs = {f"i{k}": rng.integers(0, 256, s + (3,)).astype(np.uint8) for k, (s, _) in enumerate(SHAPES)}
    sizes = {f"i{k}": list(d) for k, (_, d) in enumerate(SHAPES)}
    np.savez(tmp_path / "in.npz", **imgs)
    for method in ("bilinear", "nearest"):
        support.run_keras("resize", {"npz": str(tmp_path / "in.npz"), "npy_out": str(tmp_path / "out.npz"),
                                     "sizes": sizes, "methods": {k: method for k in imgs}}, tmp_path)
        theirs = np.load(tmp_path / "out.npz")
        for k in imgs:
            ours = resize.resize(imgs[k], sizes[k], method)
            np.testing.assert_allclose(ours, theirs[k], atol=1e-3, err_msg=f"{k} {method}")


@pytest.mark.parametrize("kw", [{}, {"crop_to_aspect_ratio": True},
                                {"pad_to_aspect_ratio": True, "interpolation": "nearest", "color_mode": "grayscale"}])
def test_pixels_against_keras_on_photos(tmp_path, kw):
    """PNG and GIF files: within the rounding to uint8 (0.5). JPEG files: TensorFlow's decode_image
    uses libjpeg's fast inexact IDCT (JDCT_IFAST), Pillow the exact one (identical to
    tf.io.decode_jpeg(dct_method='INTEGER_ACCURATE')); the difference is a few levels at most."""
    folder = support.photo_folder(tmp_path / "photos", gif=kw.get("color_mode") != "grayscale")
    kw = dict(kw, image_size=(60, 50))
    reply = support.run_keras("pixels", {"dir": str(folder), "npy": str(tmp_path / "k.npy"), "kw": kw}, tmp_path)
    ds = image_dataset_from_directory(str(folder), shuffle=False, batch_size=100, verbose=False,
                                      cache_dir=str(tmp_path / "c"), **kw)
    assert ds.file_paths == reply["file_paths"]
    ours, theirs = np.concatenate([x for x, _ in ds]), np.load(tmp_path / "k.npy")
    for path, a, b in zip(ds.file_paths, ours, theirs):
        d = np.abs(a - b)
        if path.lower().endswith((".jpg", ".jpeg")):
            assert d.mean() < 2.0 and d.max() <= 16, (path, d.mean(), d.max())
        elif kw.get("color_mode") == "grayscale" and a.std() > 0:  # color PNG to gray: libpng's gamma-aware
            assert d.mean() < 8.0, (path, d.mean(), d.max())          # conversion against Pillow's luma
        else:
            assert d.max() <= 0.5 + 1e-3, (path, d.max())
