"""hpcnn.image_files (keras.utils.load_img, img_to_array, array_to_img, save_img; issue 37 item 4)
against the live Keras 3 on the same files: the same arrays for each argument combination, and
bad input named clearly. Files are made with Pillow in a temporary folder."""
import io
import os
import warnings

import numpy as np
import pytest

from hpcnn import image_files
from hpcnn.keras import utils as kutils
from hpcnn.keras.preprocessing import image as kimage
from tests.support.live_keras import keras_or_skip

Image = pytest.importorskip("PIL.Image", reason="the image helpers need Pillow (pip install pillow)")

SIZES = [None, (20, 30), (41, 23), (37, 53)]  # (37, 53) is the files' own size: no resize


def _photo(h=37, w=53, channels=3, seed=0):
    """A smooth photo-like image (gradients and a blob) with noise: resampling filters differ on it."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w]
    planes = [(np.sin(xx / (4 + c)) + np.cos(yy / (3 + c)) + 2) * 60 + rng.normal(0, 12, (h, w))
              for c in range(channels)]
    return np.clip(np.stack(planes, -1), 0, 255).astype(np.uint8)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    out = {}
    rgb = _photo()
    Image.fromarray(rgb).save(d / "photo.jpg", quality=90)
    Image.fromarray(rgb).save(d / "photo.png")
    Image.fromarray(_photo(channels=4, seed=1)).save(d / "rgba.png")
    Image.fromarray(_photo(channels=1, seed=2)[:, :, 0]).save(d / "gray.png")
    Image.fromarray(rgb).convert("P", palette=Image.Palette.ADAPTIVE, colors=32).save(d / "palette.gif")
    Image.fromarray((_photo(channels=1, seed=3)[:, :, 0].astype(np.uint16) * 257)).save(d / "gray16.png")
    Image.fromarray(rgb).convert("CMYK").save(d / "cmyk.jpg")
    for name in ("photo.jpg", "photo.png", "rgba.png", "gray.png", "palette.gif", "gray16.png", "cmyk.jpg"):
        out[name] = str(d / name)
    (d / "notes.jpg").write_text("not an image, only an image's name\n")
    out["notes.jpg"] = str(d / "notes.jpg")
    data = (d / "photo.jpg").read_bytes()
    (d / "truncated.jpg").write_bytes(data[: len(data) // 2])
    out["truncated.jpg"] = str(d / "truncated.jpg")
    (d / "empty.png").write_bytes(b"")
    out["empty.png"] = str(d / "empty.png")
    out["dir"] = str(d)
    return out


def _same(ours, theirs):
    assert ours.mode == theirs.mode and ours.size == theirs.size
    a, b = np.asarray(ours), np.asarray(theirs)
    assert a.dtype == b.dtype and a.shape == b.shape
    np.testing.assert_array_equal(a, b)


def test_the_keras_namespaces_give_these_functions():
    for name in ("load_img", "img_to_array", "array_to_img", "save_img"):
        assert getattr(kutils, name) is getattr(image_files, name)
        assert getattr(kimage, name) is getattr(image_files, name)
    from hpcnn.keras.utils import load_img  # noqa: F401  (the tutorial's import works)
    with pytest.raises(NotImplementedError, match=r"ImageDataGenerator is not available in hpcnn"):
        kimage.ImageDataGenerator


@pytest.mark.parametrize("name", ["photo.jpg", "photo.png", "rgba.png", "gray.png", "palette.gif", "gray16.png",
                                  "cmyk.jpg"])
@pytest.mark.parametrize("color_mode", ["rgb", "grayscale", "rgba"])
def test_load_img_gives_keras_image_for_each_file_and_color_mode(files, name, color_mode):
    keras = keras_or_skip()
    ours = image_files.load_img(files[name], color_mode=color_mode)
    _same(ours, keras.utils.load_img(files[name], color_mode=color_mode))
    np.testing.assert_array_equal(image_files.img_to_array(ours), keras.utils.img_to_array(ours))


@pytest.mark.parametrize("target_size", SIZES)
@pytest.mark.parametrize("interpolation", list(image_files.INTERPOLATIONS))
@pytest.mark.parametrize("keep_aspect_ratio", [False, True])
def test_load_img_resizes_as_keras(files, target_size, interpolation, keep_aspect_ratio):
    keras = keras_or_skip()
    for name, color_mode in (("photo.jpg", "rgb"), ("rgba.png", "rgba"), ("gray.png", "grayscale")):
        kw = dict(color_mode=color_mode, target_size=target_size, interpolation=interpolation,
                  keep_aspect_ratio=keep_aspect_ratio)
        ours = image_files.load_img(files[name], **kw)
        _same(ours, keras.utils.load_img(files[name], **kw))
        if target_size is not None:
            assert ours.size == (target_size[1], target_size[0])


def test_load_img_takes_paths_bytes_and_bytesio_as_keras(files, tmp_path):
    keras = keras_or_skip()
    import pathlib
    path = files["photo.png"]
    ref = keras.utils.load_img(path, target_size=(16, 16))
    with open(path, "rb") as f:
        data = io.BytesIO(f.read())
    for given in (pathlib.Path(path), path.encode(), data):
        _same(image_files.load_img(given, target_size=(16, 16)), ref)
    copy = tmp_path / "copy.png"
    copy.write_bytes(data.getvalue())
    img = image_files.load_img(copy)
    os.remove(copy)  # load_img read the file whole and closed it: the image outlives it
    data.seek(0)
    _same(img, keras.utils.load_img(data))


@pytest.mark.parametrize("data_format", ["channels_last", "channels_first", None])
@pytest.mark.parametrize("dtype", [None, "float64", "uint8", "int32"])
def test_img_to_array_as_keras(files, data_format, dtype):
    keras = keras_or_skip()
    for name, mode in (("photo.jpg", "rgb"), ("gray.png", "grayscale"), ("gray16.png", "grayscale")):
        img = image_files.load_img(files[name], color_mode=mode)
        ours = image_files.img_to_array(img, data_format=data_format, dtype=dtype)
        theirs = keras.utils.img_to_array(img, data_format=data_format, dtype=dtype)
        assert ours.dtype == theirs.dtype and ours.shape == theirs.shape
        np.testing.assert_array_equal(ours, theirs)


def _arrays():
    rng = np.random.default_rng(5)
    return {
        "float01_rgb": rng.random((9, 11, 3)),
        "float255_rgba": rng.random((9, 11, 4)) * 255,
        "negative_gray": rng.normal(0, 3, (9, 11, 1)),
        "uint8_rgb": rng.integers(0, 256, (9, 11, 3)).astype(np.uint8),
        "wide_gray": rng.integers(0, 5000, (9, 11, 1)).astype(np.float32),
        "constant": np.full((4, 5, 3), 7.0),
    }


@pytest.mark.parametrize("which", list(_arrays()))
@pytest.mark.parametrize("scale", [True, False])
@pytest.mark.parametrize("data_format", ["channels_last", "channels_first"])
def test_array_to_img_as_keras(which, scale, data_format):
    keras = keras_or_skip()
    x = _arrays()[which]
    if data_format == "channels_first":
        x = np.moveaxis(x, -1, 0)
    before = x.copy()
    _same(image_files.array_to_img(x, data_format=data_format, scale=scale),
          keras.utils.array_to_img(x, data_format=data_format, scale=scale))
    np.testing.assert_array_equal(x, before)  # the caller's array is left alone
    _same(image_files.array_to_img(x, data_format=data_format, scale=scale, dtype="float64"),
          keras.utils.array_to_img(x, data_format=data_format, scale=scale, dtype="float64"))


@pytest.mark.parametrize("ext, file_format", [("png", None), ("jpg", None), ("jpeg", None), ("bmp", None),
                                              ("PNG", None), ("out", "png"), ("out", "jpg")])
def test_save_img_writes_what_keras_writes(tmp_path, ext, file_format):
    keras = keras_or_skip()
    x = _photo(channels=3).astype(np.float32) / 255.0
    ours, theirs = tmp_path / f"ours.{ext}", tmp_path / f"theirs.{ext}"
    image_files.save_img(ours, x, file_format=file_format)
    keras.utils.save_img(str(theirs), x, file_format=file_format)
    _same(Image.open(ours), Image.open(theirs))
    assert [p.name for p in tmp_path.iterdir() if ".tmp" in p.name] == []


def test_save_img_rgba_as_jpeg_warns_and_drops_alpha_as_keras(tmp_path):
    keras = keras_or_skip()
    x = _photo(channels=4)
    with pytest.warns(UserWarning, match="JPEG format does not support RGBA"):
        image_files.save_img(tmp_path / "ours.jpg", x, scale=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        keras.utils.save_img(str(tmp_path / "theirs.jpg"), x, scale=False)
    _same(Image.open(tmp_path / "ours.jpg"), Image.open(tmp_path / "theirs.jpg"))


def test_save_img_to_a_file_object_and_kwargs(tmp_path):
    buf = io.BytesIO()
    x = _photo()
    image_files.save_img(buf, x, file_format="png", scale=False, compress_level=1)
    np.testing.assert_array_equal(np.asarray(Image.open(io.BytesIO(buf.getvalue()))), x)
    image_files.save_img(tmp_path / "x.tif", x, scale=False)  # Pillow's name for .tif is TIFF
    np.testing.assert_array_equal(np.asarray(Image.open(tmp_path / "x.tif")), x)


def test_a_round_trip_keeps_the_pixels(tmp_path):
    x = _photo()
    image_files.save_img(tmp_path / "x.png", x, scale=False)
    back = image_files.img_to_array(image_files.load_img(tmp_path / "x.png"), dtype="uint8")
    np.testing.assert_array_equal(back, x)


# ---------------------------------------------------------------------- bad input
def test_a_missing_file_is_named(tmp_path):
    missing = tmp_path / "no_such_photo.jpg"
    with pytest.raises(FileNotFoundError, match=r"load_img: no file '.*no_such_photo\.jpg'"):
        image_files.load_img(missing)


def test_a_folder_is_named(files):
    with pytest.raises(IsADirectoryError, match=r"is a folder, not an image file"):
        image_files.load_img(files["dir"])


@pytest.mark.parametrize("name", ["notes.jpg", "empty.png"])
def test_a_file_that_is_not_an_image_is_named(files, name):
    with pytest.raises(Image.UnidentifiedImageError, match=rf"load_img: '.*{name}' is not an image Pillow can read"):
        image_files.load_img(files[name])


def test_a_truncated_file_is_named(files):
    with pytest.raises(OSError, match=r"load_img: '.*truncated\.jpg' is damaged or truncated"):
        image_files.load_img(files["truncated.jpg"])


def test_bad_arguments_are_named(files):
    path = files["photo.png"]
    with pytest.raises(ValueError, match=r"`color_mode` argument of load_img.*'rgb'.*Received: color_mode='RGB'"):
        image_files.load_img(path, color_mode="RGB")
    with pytest.raises(ValueError, match=r"`interpolation` argument of load_img.*'lanczos'"):
        image_files.load_img(path, target_size=(8, 8), interpolation="area")
    with pytest.raises(ValueError, match=r"`target_size` argument must be a tuple of 2 integers"):
        image_files.load_img(path, target_size=(8, 8, 3))
    with pytest.raises(ValueError, match=r"`target_size`.*0 < value"):
        image_files.load_img(path, target_size=(0, 8))
    with pytest.raises(TypeError, match=r"path should be a path .* not int"):
        image_files.load_img(3)
    with pytest.raises(ValueError, match=r"`data_format` argument of img_to_array"):
        image_files.img_to_array(np.zeros((2, 2, 3)), data_format="NHWC")
    with pytest.raises(ValueError, match=r"img_to_array: unsupported image shape \(2, 2, 2, 3\)"):
        image_files.img_to_array(np.zeros((2, 2, 2, 3)))


def test_bad_arrays_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"array_to_img: expected one image of rank 3, got .* \(4, 5\)"):
        image_files.array_to_img(np.zeros((4, 5)))
    with pytest.raises(ValueError, match=r"array_to_img: 2 channels; expected 1 \(grayscale\), 3 \(RGB\) or 4"):
        image_files.array_to_img(np.zeros((4, 5, 2)))
    bad = np.zeros((4, 5, 3))
    bad[1, 1, 1] = np.nan
    with pytest.raises(ValueError, match=r"array_to_img: the array holds NaN or infinite values"):
        image_files.array_to_img(bad)
    with pytest.raises(ValueError, match=r"save_img: cannot tell the image format from '.*photo\.xyz'"):
        image_files.save_img(tmp_path / "photo.xyz", np.zeros((4, 5, 3)))
    with pytest.raises(ValueError, match=r"save_img: give file_format"):
        image_files.save_img(io.BytesIO(), np.zeros((4, 5, 3)))
    with pytest.raises(FileNotFoundError, match=r"save_img: cannot write '.*no_dir.*': no such directory"):
        image_files.save_img(tmp_path / "no_dir" / "x.png", np.zeros((4, 5, 3)))


def test_a_failed_save_leaves_no_file(tmp_path):
    """A 32-bit grayscale image cannot be a JPEG: Pillow fails in the middle of writing, and neither
    the target nor the temporary file remains."""
    wide = np.arange(20, dtype=np.float32).reshape(4, 5, 1) * 1000
    with pytest.raises(OSError):
        image_files.save_img(tmp_path / "wide.jpg", wide, scale=False)
    assert list(tmp_path.iterdir()) == []
