"""Files of a photo folder that are not clean (docs/reliability.md, "Folders of images"): each is
used as TensorFlow's decoders (so Keras) use it, or left out with a warning naming the file and why;
never a crash, a hang or a silent black image. A decompression bomb is refused from its header."""
import os
import struct
import warnings
import zlib

import numpy as np
import pytest

from tests.support import image_folders as support

from hpcnn.data import image_dataset_from_directory
from hpcnn.image_folders import ImageProblem, decode

Image = support.PIL


def load(folder, cache, **kw):
    kw.setdefault("image_size", (8, 8))
    return image_dataset_from_directory(str(folder), verbose=False, cache_dir=str(cache), shuffle=False, **kw)


def rows_by_name(ds):
    x = np.concatenate([b[0] for b in ds])
    return {os.path.basename(p): x[i] for i, p in enumerate(ds.file_paths)}


def bomb_png(path, w=50_000, h=50_000):
    """A PNG whose header declares w x h pixels (its data: a few bytes)."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\0" * 16))
                     + chunk(b"IEND", b""))


@pytest.fixture(scope="module")
def odd(tmp_path_factory):
    """One class folder of every kind of odd file."""
    root = tmp_path_factory.mktemp("odd") / "imgs"
    d = root / "k"
    d.mkdir(parents=True)
    red = np.zeros((16, 24, 3), np.uint8)
    red[..., 0] = 200
    Image.fromarray(red).save(d / "rgb.png")
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90 degrees": TensorFlow ignores it, so do we
    Image.fromarray(red).save(d / "exif_rotated.jpg", exif=exif, quality=95)
    Image.fromarray(red[..., 0]).save(d / "gray.jpg", quality=95)
    Image.fromarray(red).convert("CMYK").save(d / "cmyk.jpg", quality=95)
    Image.fromarray(red).convert("P", palette=Image.Palette.ADAPTIVE).save(d / "palette.png")
    Image.fromarray(np.dstack([red, np.full((16, 24), 10, np.uint8)])).save(d / "rgba.png")
    Image.fromarray(np.full((16, 24), 51400, np.uint16)).save(d / "sixteen.png")  # 51400 >> 8 = 200
    frames = [Image.fromarray(red), Image.fromarray(np.zeros_like(red))]
    frames[0].save(d / "animated.gif", save_all=True, append_images=frames[1:])
    good = (d / "rgb.png").read_bytes()
    jpeg = (d / "gray.jpg").read_bytes()
    (d / "truncated.jpg").write_bytes(jpeg[: len(jpeg) // 2])
    (d / "corrupt.png").write_bytes(good[:40] + b"\x00" * 60 + good[100:])
    (d / "text.jpg").write_text("this is not an image\n")
    (d / "empty.png").write_bytes(b"")
    (d / "._rgb.png").write_bytes(b"\x00\x05\x16\x07 AppleDouble")  # macOS resource fork: a hidden file
    bomb_png(d / "bomb.png")
    name = os.fsdecode(b"caf\xe9.png")  # Latin-1 bytes: not UTF-8
    Image.fromarray(red).save(os.path.join(os.fsencode(d), os.fsencode(name)))
    (root / "empty_class").mkdir()
    return root


@pytest.fixture(scope="module")
def loaded(odd, tmp_path_factory):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ds = load(odd, tmp_path_factory.mktemp("cache"))
    return ds, [str(w.message) for w in caught]


def test_damaged_files_are_left_out_with_one_warning_naming_each(loaded):
    ds, messages = loaded
    (text,) = [m for m in messages if "left out" in m]
    for name, why in [("truncated.jpg", "damaged or truncated"), ("corrupt.png", ": "),
                      ("text.jpg", "not an image"), ("empty.png", "empty file (0 bytes)"),
                      ("._rgb.png", "not an image"), ("bomb.png", "decompression bomb")]:
        assert any(name in line and why in line for line in text.splitlines()), (name, text)
        assert not any(p.endswith(os.sep + name) for p in ds.file_paths)
    assert {os.path.basename(p) for p, _ in ds.refused_files} >= {"truncated.jpg", "bomb.png", "empty.png"}


def test_odd_but_valid_files_are_used_as_tensorflow_uses_them(loaded):
    ds, _ = loaded
    rows = rows_by_name(ds)
    assert ds.class_names == ["empty_class", "k"]  # an empty class folder is a class, as in Keras
    for name in ("rgb.png", "palette.png", "rgba.png", "animated.gif", os.fsdecode(b"caf\xe9.png")):
        np.testing.assert_allclose(rows[name][..., 0], 200, atol=2, err_msg=name)  # alpha dropped, frame 0
        np.testing.assert_allclose(rows[name][..., 1:], 0, atol=2, err_msg=name)
    assert np.abs(rows["exif_rotated.jpg"][..., 0] - 200).max() < 8  # used as stored (no rotation)
    assert np.abs(rows["cmyk.jpg"][..., 0] - 200).max() < 12 and rows["cmyk.jpg"][..., 1:].max() < 12
    assert np.abs(rows["gray.jpg"] - 200).max() < 4  # gray replicated to 3 channels
    np.testing.assert_array_equal(rows["sixteen.png"], 200)  # 16-bit: the high byte


def test_bomb_refused_from_its_header_without_decoding(tmp_path):
    bomb_png(tmp_path / "bomb.png")
    with pytest.raises(ImageProblem, match=r"bomb\.png: .*decompression bomb"):
        decode.decode_file(str(tmp_path / "bomb.png"), decode.Recipe((8, 8), 3, "bilinear", None))
    bomb_png(tmp_path / "big.png", 20_000, 10_000)  # 200 M pixels: over the limit as well
    with pytest.raises(ImageProblem, match="decompression bomb"):
        decode.decode_file(str(tmp_path / "big.png"), decode.Recipe((8, 8), 3, "bilinear", None))


def test_symlinks_follow_links(tmp_path):
    outside = support.make_folder(tmp_path / "outside", {"x": 2})
    root = tmp_path / "imgs"
    (root / "cls").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / "cls" / "own.png")
    os.symlink(outside / "x", root / "cls" / "linked_dir")
    os.symlink(outside / "x" / "img_000.png", root / "cls" / "linked_file.png")
    os.symlink(tmp_path / "missing.png", root / "cls" / "dangling.png")
    with pytest.warns(UserWarning, match=r"dangling\.png: cannot be read"):
        plain = load(root, tmp_path / "c1")
    names = sorted(os.path.relpath(p, root) for p in plain.file_paths)
    assert names == ["cls/linked_file.png", "cls/own.png"]  # a linked file is listed; a linked folder not
    with pytest.warns(UserWarning, match="dangling"):
        followed = load(root, tmp_path / "c2", follow_links=True)
    assert len(followed.file_paths) == 4


def test_a_subset_of_only_damaged_files_is_an_error_naming_one(tmp_path):
    d = tmp_path / "imgs" / "k"
    d.mkdir(parents=True)
    (d / "a.png").write_text("no")
    with pytest.raises(ValueError, match=r"no usable image .*a\.png: not an image"):
        load(tmp_path / "imgs", tmp_path / "c")


def test_a_symlink_loop_with_follow_links_ends_with_a_warning(tmp_path):
    root = tmp_path / "imgs"
    (root / "cls" / "sub").mkdir(parents=True)
    Image.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / "cls" / "sub" / "a.png")
    os.symlink(root / "cls", root / "cls" / "sub" / "up")  # a link back up: a loop
    with pytest.warns(UserWarning, match=r"up is a folder already listed \(a symbolic link loop\)"):
        ds = load(root, tmp_path / "c", follow_links=True)
    assert [os.path.relpath(p, root) for p in ds.file_paths] == ["cls/sub/a.png"]
