"""The resize of image_dataset_from_directory against a float64 reference of TensorFlow's bilinear
(half-pixel centres, no antialiasing) and nearest rules, Keras' crop/pad geometry, and, where
TensorFlow is installed, against tf.image.resize itself and Keras' whole function on real photos."""
import numpy as np
import pytest

from tests.support import image_folders as support

from hpcnn.data import image_dataset_from_directory
from hpcnn.image_folders import resize


def reference_bilinear(img, size):
    """TensorFlow's bilinear rule in float64, one output pixel at a time."""
    h, w = img.shape[:2]
    out = np.zeros(tuple(size) + img.shape[2:])
    for i in range(size[0]):
        sy = (i + 0.5) * h / size[0] - 0.5
        y0, y1, dy = max(int(np.floor(sy)), 0), min(int(np.ceil(sy)), h - 1), sy - np.floor(sy)
        for j in range(size[1]):
            sx = (j + 0.5) * w / size[1] - 0.5
            x0, x1, dx = max(int(np.floor(sx)), 0), min(int(np.ceil(sx)), w - 1), sx - np.floor(sx)
            top = img[y0, x0] * (1 - dx) + img[y0, x1] * dx
            bottom = img[y1, x0] * (1 - dx) + img[y1, x1] * dx
            out[i, j] = top * (1 - dy) + bottom * dy
    return out


SHAPES = [((37, 53), (16, 20)), ((12, 9), (30, 31)), ((5, 5), (5, 5)), ((64, 48), (7, 50))]


@pytest.mark.parametrize("src, dst", SHAPES)
def test_bilinear_matches_float64_reference(src, dst):
    img = np.random.default_rng(0).integers(0, 256, src + (3,)).astype(np.uint8)
    got = resize.resize(img, dst, "bilinear")
    assert got.dtype == np.float32 and got.shape == dst + (3,)
    np.testing.assert_allclose(got, reference_bilinear(img.astype(np.float64), dst), atol=2e-3)


def test_nearest_rule():
    img = np.arange(10, dtype=np.uint8).reshape(1, 10, 1)
    assert resize.resize(img, (1, 4), "nearest")[0, :, 0].tolist() == [1, 3, 6, 8]  # floor((j + .5) * 2.5)
    assert resize.resize(img, (1, 20), "nearest")[0, ::2, 0].tolist() == list(range(10))


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
