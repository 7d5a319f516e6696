"""resize_image (csrc/data/image_resize.h): TensorFlow's bilinear and nearest resize (half-pixel
centres, no antialiasing) against a float64 reference; the uint8 output is the float one rounded.
The live comparison with tf.image.resize is tests/python/image_folders/test_resize.py."""
import numpy as np
import pytest

from hpcnn import _core

resize_image = _core.data.resize_image


def reference(img, oh, ow, method):
    h, w = img.shape[:2]
    img = img.astype(np.float64)
    out = np.zeros((oh, ow, img.shape[2]))
    for i in range(oh):
        for j in range(ow):
            if method == "nearest":
                out[i, j] = img[min(int(np.floor((i + 0.5) * h / oh)), h - 1), min(int(np.floor((j + 0.5) * w / ow)), w - 1)]
                continue
            sy, sx = (i + 0.5) * h / oh - 0.5, (j + 0.5) * w / ow - 0.5
            y0, y1, dy = max(int(np.floor(sy)), 0), min(int(np.ceil(sy)), h - 1), sy - np.floor(sy)
            x0, x1, dx = max(int(np.floor(sx)), 0), min(int(np.ceil(sx)), w - 1), sx - np.floor(sx)
            top = img[y0, x0] + (img[y0, x1] - img[y0, x0]) * dx
            bottom = img[y1, x0] + (img[y1, x1] - img[y1, x0]) * dx
            out[i, j] = top + (bottom - top) * dy
    return out


@pytest.mark.parametrize("src, dst", [((37, 53, 3), (16, 20)), ((12, 9, 1), (30, 31)), ((5, 5, 4), (5, 5)),
                                      ((64, 48, 3), (7, 50)), ((1, 1, 3), (3, 2)), ((3, 200, 2), (9, 1))])
@pytest.mark.parametrize("method", ["bilinear", "nearest"])
def test_against_float64_reference(src, dst, method):
    img = np.random.default_rng(sum(src)).integers(0, 256, src).astype(np.uint8)
    ref = reference(img, *dst, method)
    got = resize_image(img, *dst, method, False)
    assert got.dtype == np.float32 and got.shape == dst + (src[2],)
    np.testing.assert_allclose(got, ref, atol=2e-3)
    u8 = resize_image(img, *dst, method, True)
    assert u8.dtype == np.uint8
    np.testing.assert_array_equal(u8, np.clip(np.rint(got), 0, 255).astype(np.uint8))


def test_gray_2d_and_refusals():
    assert resize_image(np.zeros((4, 4), np.uint8), 2, 2, "bilinear", False).shape == (2, 2, 1)
    with pytest.raises(ValueError, match="must be 'bilinear' or 'nearest', got 'bicubic'"):
        resize_image(np.zeros((4, 4, 3), np.uint8), 2, 2, "bicubic", False)
    with pytest.raises(ValueError, match="the size must be >= 1"):
        resize_image(np.zeros((4, 4, 3), np.uint8), 0, 2, "bilinear", False)
    with pytest.raises(ValueError, match="empty image"):
        resize_image(np.zeros((0, 4, 3), np.uint8), 2, 2, "bilinear", False)
    with pytest.raises((ValueError, TypeError), match="uint8"):
        resize_image(np.zeros((4, 4, 3), np.float32), 2, 2, "bilinear", False)
