"""RandomRotation and RandomZoom (issue 23), and seed= on every augmentation layer.

- The op (hpcnn._core.ops.augment) against a NumPy reference of the documented math
  (csrc/ops/augment.h: Keras 3's affine_transform matrix of a rotation about the centre and of a
  zoom about the centre, every fill mode and interpolation), at fixed factors (factor=(a, a)) and
  at random ones (the draws are Philox words of (seed, stream, global row)).
- Keras' meaning without the reference: a quarter turn is np.rot90 (positive: counter-clockwise),
  a zoom factor of +1 halves the image (zoom out), -0.5 doubles it (zoom in); inference is the
  identity.
- Live Keras 3 (jax backend; skipped without the `keras` extra, an error in CI): the deterministic
  transform at a fixed factor, every fill mode and interpolation, equal to Keras' within 1e-5
  (bilinear: only float32 rounding of the coordinates differs; measured <= 1e-6 on values in
  [0, 1)) and exactly for nearest interpolation (these shapes have no half-pixel ties); the
  layers' configs as Keras' get_config; Keras' files with them load in hpcnn and hpcnn's in Keras.
- In a model: the training step sees the op's images keyed by (model seed, step, global row,
  layer); the same with 1 and 2 CPU replicas; a layer's seed= gives the same images whatever the
  model's seed (the key layer_seed_key(seed), stream = step); configs and files keep the seed.
- Bad arguments: ValueErrors naming the layer (Keras' words)."""
import io
import contextlib
import os

import numpy as np
import pytest

import hpcnn
from hpcnn import _core, optimizers
from hpcnn.distribute import MirroredStrategy
from hpcnn.layers import (Conv2D, Dense, Flatten, InputLayer, RandomCrop, RandomFlip, RandomRotation, RandomTranslation,
                          RandomZoom, Rescaling, ZeroPadding2D)
from tests.support.dist_common import BATCH, make_arrays, rel_err, small_cnn
from tests.support.augmentation_reference import philox_words, unit

ops = _core.ops
FILL_MODES = ("constant", "reflect", "wrap", "nearest")
INTERPOLATIONS = ("nearest", "bilinear")


# ------------------------------------------------------------------ NumPy reference
def f32(v):
    return np.float32(v)


def fma32(a, b, c):
    """fmaf: a * b + c rounded once to float32 (a product of two float32s is exact in float64)."""
    return (np.asarray(a, np.float64) * np.asarray(b, np.float64) + np.asarray(c, np.float64)).astype(np.float32)


def fix(i, size, mode):
    """Integer indices fixed by the fill mode (-1: the fill value), vectorized."""
    inside = (i >= 0) & (i < size)
    if mode == "nearest":
        j = np.clip(i, 0, size - 1)
    elif mode == "wrap":
        j = np.mod(i, size)
    elif mode == "reflect":
        k = np.mod(i, 2 * size)
        j = np.where(k >= size, 2 * size - 1 - k, k)
    else:
        j = np.full_like(i, -1)
    return np.where(inside, i, j)


def taps(src, size, mode, interp):
    """[(index, weight)] per coordinate of `src` (float32 array)."""
    s = src.astype(np.float64)
    if interp == "nearest":
        return [(fix((np.floor(np.abs(s) + 0.5) * np.sign(s)).astype(np.int64), size, mode), np.ones_like(s))]
    lower = np.floor(s)
    frac = s - lower
    i = lower.astype(np.int64)
    return [(fix(i, size, mode), 1.0 - frac), (fix(i + 1, size, mode), frac)]


def layer_seed_key(seed):
    """nn::layer_seed_key: one Philox block of the layer's seed, stream 2^64 - 1."""
    w = philox_words(seed, 2**64 - 1, [0])[0]
    return int(w[0]) | (int(w[1]) << 32)


def affine_of(cfg, words, h, w, training):
    """The sample's (a0, a1, a2, b0, b1, b2) as augment_body.h's sample_affine computes them."""
    if not training:
        return f32(1), f32(0), f32(0), f32(0), f32(1), f32(0)
    cx, cy = f32(0.5 * (w - 1)), f32(0.5 * (h - 1))
    if cfg["class_name"] == "RandomRotation":
        lo, hi = f32(cfg["factor_lo"]), f32(cfg["factor_hi"])
        turn = fma32(unit(words[0]), f32(hi - lo), lo)
        t = f32(f32(turn * f32(360)) * f32(np.pi / 180))
        sin, cos = f32(np.sin(np.float64(t))), f32(np.cos(np.float64(t)))
        a0, a1, b0, b1 = cos, -sin, sin, cos
        a2 = fma32(-cy, a1, fma32(-cx, a0, cx))
        b2 = fma32(-cy, b1, fma32(-cx, b0, cy))
        return a0, a1, a2, b0, b1, b2
    hlo, hhi = f32(cfg["height_lo"]), f32(cfg["height_hi"])
    zy = fma32(unit(words[0]), f32(hhi - hlo), f32(1) + hlo)
    if "width_lo" in cfg:
        wlo, whi = f32(cfg["width_lo"]), f32(cfg["width_hi"])
        zx = fma32(unit(words[1]), f32(whi - wlo), f32(1) + wlo)
    else:
        zx = zy
    return zx, f32(0), f32(cx * f32(1 - zx)), f32(0), zy, f32(cy * f32(1 - zy))


def reference(x, cfg, training=True, seed=0, stream=0, first_row=0):
    """What csrc/ops/augment.h documents for a rotation or a zoom, in float64 (x: (n, h, w, c))."""
    x = np.asarray(x, np.float64)
    n, h, w, c = x.shape
    mode, interp, fill = cfg["fill_mode"], cfg["interpolation"], cfg["fill_value"]
    words = philox_words(seed, stream, first_row + np.arange(n))
    ys, xs = np.meshgrid(np.arange(h, dtype=np.float32), np.arange(w, dtype=np.float32), indexing="ij")
    out = np.zeros((n, h, w, c))
    for s in range(n):
        a0, a1, a2, b0, b1, b2 = affine_of(cfg, words[s], h, w, training)
        col = fma32(a0, xs, fma32(a1, ys, a2))
        row = fma32(b0, xs, fma32(b1, ys, b2))
        for iy, wy in taps(row, h, mode, interp):
            for ix, wx in taps(col, w, mode, interp):
                valid = (iy >= 0) & (ix >= 0)
                v = np.where(valid[..., None], x[s, np.clip(iy, 0, h - 1), np.clip(ix, 0, w - 1)], fill)
                out[s] += (wy * wx)[..., None] * v
    return out


def images(n=6, h=9, w=7, c=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, h, w, c)).astype(np.float32)


def rotation(lo, hi, mode="reflect", interp="bilinear", fill=0.0):
    return dict(class_name="RandomRotation", factor_lo=lo, factor_hi=hi, fill_mode=mode, fill_value=fill,
                interpolation=interp)


def zoom(hlo, hhi, wlo=None, whi=None, mode="reflect", interp="bilinear", fill=0.0):
    width = {} if wlo is None else dict(width_lo=wlo, width_hi=whi)
    return dict(class_name="RandomZoom", height_lo=hlo, height_hi=hhi, **width, fill_mode=mode, fill_value=fill,
                interpolation=interp)


FIXED = ([rotation(a, a, m, i, 0.25) for a in (0.1, -0.3) for m in FILL_MODES for i in INTERPOLATIONS]
         + [zoom(0.2, 0.2, -0.35, -0.35, m, i, 0.25) for m in FILL_MODES for i in INTERPOLATIONS]
         + [zoom(-0.3, -0.3, mode=m, interp="bilinear") for m in FILL_MODES])
RANDOM = ([rotation(-0.7, 0.4, m, i, -0.5) for m in FILL_MODES for i in INTERPOLATIONS]
          + [zoom(-0.6, 0.5, -0.2, 0.9, m, i, -0.5) for m in FILL_MODES for i in INTERPOLATIONS]
          + [zoom(-0.5, 0.5, mode="constant")])


def cfg_id(c):
    return "-".join(str(v) for v in c.values())


# ------------------------------------------------------------------ the op
@pytest.mark.parametrize("cfg", FIXED, ids=cfg_id)
def test_fixed_factor_matches_numpy_reference(cfg):
    x = images()
    got = ops.augment(x, cfg, seed=3, stream=5)
    np.testing.assert_allclose(got, reference(x, cfg, seed=3, stream=5), rtol=1e-5, atol=1e-5)
    # A fixed factor: every image gets the same transform, whatever its key.
    np.testing.assert_array_equal(got[1:2], ops.augment(x[1:2], cfg, seed=99, stream=1))


@pytest.mark.parametrize("cfg", RANDOM, ids=cfg_id)
@pytest.mark.parametrize("training", [True, False])
@pytest.mark.parametrize("channels", [1, 2, 3])  # the CPU unrolls 1 and 3 channels, loops over others
def test_random_factor_matches_numpy_reference(cfg, training, channels):
    x = images(n=8, c=channels)
    kw = dict(seed=2**40 + 7, stream=3 * 1024 + 2, first_row=1000)
    got = ops.augment(x, cfg, training=training, **kw)
    np.testing.assert_allclose(got, reference(x, cfg, training, **kw), rtol=1e-5, atol=1e-5)
    if not training:
        np.testing.assert_array_equal(got, x)  # inference: the identity, as Keras


def test_keras_meaning_without_the_reference():
    img = np.arange(1, 26, dtype=np.float32).reshape(1, 5, 5, 1)
    # A quarter turn with a positive factor: counter-clockwise (np.rot90).
    got = ops.augment(img, rotation(0.25, 0.25, "constant", "nearest"))
    np.testing.assert_array_equal(got[0, :, :, 0], np.rot90(img[0, :, :, 0]))
    got = ops.augment(img, rotation(-0.25, -0.25, "constant", "nearest"))
    np.testing.assert_array_equal(got[0, :, :, 0], np.rot90(img[0, :, :, 0], k=-1))
    # Zoom factor +1 (scale 2): zoom out, every second pixel around the centre, fill at the border.
    got = ops.augment(img, zoom(1.0, 1.0, mode="constant", interp="bilinear"))[0, :, :, 0]
    want = np.zeros((5, 5), np.float32)
    want[1:4, 1:4] = img[0, 0:5:2, 0:5:2, 0]
    np.testing.assert_array_equal(got, want)
    # Zoom factor -0.5 (scale 0.5) on a 9x9 image: zoom in, the centre 5x5 blown up twice.
    big = np.arange(81, dtype=np.float32).reshape(1, 9, 9, 1)
    got = ops.augment(big, zoom(-0.5, -0.5, mode="constant", interp="nearest"))[0, ::2, ::2, 0]
    np.testing.assert_array_equal(got, big[0, 2:7, 2:7, 0])
    # Only the height zooms when the width's factor is 0.
    got = ops.augment(big, zoom(-0.5, -0.5, 0.0, 0.0, mode="constant", interp="nearest"))[0, ::2, :, 0]
    np.testing.assert_array_equal(got, big[0, 2:7, :, 0])


def test_draws_depend_on_seed_stream_and_global_row_only():
    x = images(n=30, h=8, w=8, c=2)
    for cfg in (RANDOM[1], RANDOM[9]):
        whole = ops.augment(x, cfg, seed=11, stream=7)
        parts = np.concatenate([ops.augment(x[:13], cfg, seed=11, stream=7),
                                ops.augment(x[13:], cfg, seed=11, stream=7, first_row=13)])
        np.testing.assert_array_equal(whole, parts)
        old = hpcnn.get_num_threads()
        try:
            hpcnn.set_num_threads(1)
            np.testing.assert_array_equal(ops.augment(x, cfg, seed=11, stream=7), whole)
        finally:
            hpcnn.set_num_threads(old)
        assert not np.array_equal(ops.augment(x, cfg, seed=12, stream=7), whole)
        assert not np.array_equal(ops.augment(x, cfg, seed=11, stream=8), whole)


def test_host_pass_gathers_rows_and_decodes_uint8():
    r = np.random.default_rng(4)
    u8 = r.integers(0, 256, (10, 6, 5, 3), dtype=np.uint8)
    scale, shift = [1 / 255, 2 / 255, 0.5], [0.0, -1.0, 3.0]
    decoded = ops.decode_u8(u8, scale, shift)
    rows = [7, 2, 2, 9]
    for cfg in (RANDOM[1], RANDOM[9]):
        want = ops.augment(decoded[rows], cfg, seed=3, stream=1, first_row=20)
        np.testing.assert_array_equal(
            ops.augment(u8, cfg, seed=3, stream=1, first_row=20, rows=rows, scale=scale, shift=shift), want)


# ------------------------------------------------------------------ live Keras
def keras_module():
    os.environ.setdefault("KERAS_BACKEND", "jax")
    if os.environ.get("HPCNN_EXPECT_KERAS") == "1":
        import keras  # CI: a missing extra is an error, not a skip
        return keras
    return pytest.importorskip("keras", reason='the live Keras comparison needs `pip install --no-build-isolation ".[keras]"`')


@pytest.mark.parametrize("mode", FILL_MODES)
@pytest.mark.parametrize("interp", INTERPOLATIONS)
def test_fixed_factor_equals_keras(mode, interp):
    keras = keras_module()
    x = np.random.default_rng(0).random((3, 9, 7, 2), dtype=np.float32)
    kw = dict(fill_mode=mode, interpolation=interp, fill_value=0.3)
    pairs = [(keras.layers.RandomRotation((0.1, 0.1), **kw), RandomRotation((0.1, 0.1), **kw)),
             (keras.layers.RandomRotation((-0.3, -0.3), **kw), RandomRotation((-0.3, -0.3), **kw)),
             (keras.layers.RandomZoom((0.15, 0.15), (-0.35, -0.35), **kw), RandomZoom((0.15, 0.15), (-0.35, -0.35), **kw)),
             (keras.layers.RandomZoom((-0.3, -0.3), **kw), RandomZoom((-0.3, -0.3), **kw))]
    for theirs, ours in pairs:
        want = np.asarray(theirs(x, training=True))
        got = ops.augment(x, ours.core_config(), seed=1, stream=2)
        if interp == "nearest":
            np.testing.assert_array_equal(got, want)
        else:
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-5)
        np.testing.assert_array_equal(np.asarray(theirs(x, training=False)), x)  # both: identity in inference


def test_configs_match_keras():
    keras = keras_module()
    for theirs, ours in [(keras.layers.RandomRotation(0.2, seed=4), RandomRotation(0.2, seed=4)),
                         (keras.layers.RandomRotation((0.3, -0.1), fill_mode="constant"),
                          RandomRotation((0.3, -0.1), fill_mode="constant")),
                         (keras.layers.RandomZoom(0.2, (-0.1, 0.3), interpolation="nearest"),
                          RandomZoom(0.2, (-0.1, 0.3), interpolation="nearest")),
                         (keras.layers.RandomZoom((0.1, 0.2)), RandomZoom((0.1, 0.2)))]:
        k = theirs.get_config()
        o = ours.get_config()
        for key in ours.config_keys:
            kv = list(k[key]) if isinstance(k[key], tuple) else k[key]
            assert o[key] == kv, (type(ours).__name__, key, o[key], kv)


def test_keras_files_round_trip(tmp_path):
    # Keras' files with the tutorials' augmentation block load in hpcnn (seeds kept) and predict the
    # same (inference: the identity); hpcnn's load in Keras likewise.
    keras = keras_module()
    x = np.random.default_rng(0).random((4, 12, 12, 3), dtype=np.float32)
    km = keras.Sequential([keras.Input((12, 12, 3)), keras.layers.RandomFlip("horizontal", seed=3),
                           keras.layers.RandomRotation(0.1, seed=4),
                           keras.layers.RandomZoom(0.2, (-0.1, 0.1), fill_mode="constant"),
                           keras.layers.Flatten(), keras.layers.Dense(3)])
    hm = head_model([RandomRotation(0.1, seed=4), RandomZoom(0.2, fill_mode="wrap")], shape=(12, 12, 3))
    hm.build()
    for name in ("m.keras", "m.h5"):
        km.save(tmp_path / f"k{name}")
        loaded = hpcnn.saving.load_model(str(tmp_path / f"k{name}"))
        assert [type(la).__name__ for la in loaded.layers[:3]] == ["RandomFlip", "RandomRotation", "RandomZoom"]
        assert (loaded.layers[0].seed, loaded.layers[1].seed, loaded.layers[1].factor) == (3, 4, (-0.1, 0.1))
        assert (loaded.layers[2].width_factor, loaded.layers[2].fill_mode) == ([-0.1, 0.1], "constant")
        np.testing.assert_allclose(loaded.predict(x, verbose=0), km.predict(x, verbose=0), rtol=1e-5, atol=1e-5)
        hm.save(str(tmp_path / f"h{name}"))
        theirs = keras.saving.load_model(tmp_path / f"h{name}", compile=False)
        assert (theirs.layers[0].seed, tuple(theirs.layers[0].factor)) == (4, (-0.1, 0.1))
        assert theirs.layers[1].fill_mode == "wrap" and theirs.layers[1].width_factor is None
        np.testing.assert_allclose(theirs.predict(x, verbose=0), hm.predict(x, verbose=0), rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------ in a model
def core_index(model, layer):
    position = [la for la, _ in model.graph_nodes()].index(layer)
    return sum(len(c) for c in model.core.core_layers[:position])


def head_model(front, shape=(6, 6, 2), seed=3):
    return hpcnn.Sequential([InputLayer(input_shape=shape), *front, Flatten(), Dense(3, activation="softmax")],
                            seed=seed)


def data(n=8, shape=(6, 6, 2), seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal((n, *shape)).astype(np.float32), r.integers(0, 3, n)


def trained(model, x, y, batch_size=None, epochs=1):
    model.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    with contextlib.redirect_stdout(io.StringIO()):
        model.fit(x, y, batch_size=batch_size or len(x), epochs=epochs, shuffle=False, verbose=0)
    return model.get_weights()


def trained_on(images, y, weights):
    plain = head_model([])
    plain.build()
    plain.set_weights(weights)
    return trained(plain, images, y)


@pytest.mark.parametrize("front", [
    lambda: [RandomRotation(0.2)],
    lambda: [RandomZoom((-0.3, 0.2), fill_mode="constant", fill_value=0.5)],
    lambda: [RandomFlip("horizontal"), RandomRotation(0.1, interpolation="nearest"), RandomZoom(0.2, 0.1)],
    lambda: [Rescaling(1.0), RandomRotation((-0.2, 0.3), fill_mode="wrap"), RandomZoom(0.3)],  # ops of the step
], ids=["rotation", "zoom", "flip+rotation+zoom", "after-rescaling"])
def test_training_step_sees_the_documented_augmentation(front):
    x, y = data()
    layers = front()
    m = head_model(layers)
    m.build()
    aug = x
    for layer in layers:
        if isinstance(layer, Rescaling):
            continue
        aug = ops.augment(aug, layer.core_config(), seed=m.seed, stream=1 * 1024 + core_index(m, layer))
    assert not np.array_equal(aug, x)
    w0 = m.get_weights()
    for a, b in zip(trained(m, x, y), trained_on(aug, y, w0)):
        np.testing.assert_array_equal(a, b)
    # Inference: the identity.
    plain = head_model([])
    plain.build()
    plain.set_weights(m.get_weights())
    np.testing.assert_array_equal(m.predict(x, verbose=0), plain.predict(x, verbose=0))


def test_same_with_one_and_two_cpu_replicas():
    x, y = make_arrays()
    front = lambda: [RandomRotation(0.15), Rescaling(0.5), RandomZoom(0.2, seed=9)]  # noqa: E731
    ref = small_cnn(front())
    ref.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    with MirroredStrategy(["cpu", "cpu"]).scope():
        model = small_cnn(front())
    model.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    flat = lambda m: np.concatenate([w.ravel() for w in m.get_weights()])  # noqa: E731
    assert rel_err(flat(model), flat(ref)) <= 1e-5
    plain = small_cnn([Rescaling(0.5)])
    plain.fit(x, y, batch_size=BATCH, epochs=2, shuffle=True, verbose=0)
    assert rel_err(flat(plain), flat(ref)) > 1e-3  # the augmentation does act


@pytest.mark.parametrize("make", [
    lambda s: RandomFlip("horizontal", seed=s), lambda s: RandomTranslation(0.3, 0.2, seed=s),
    lambda s: RandomRotation(0.3, seed=s), lambda s: RandomZoom(0.3, seed=s),
    lambda s: RandomCrop(5, 4, seed=s),
], ids=["flip", "translation", "rotation", "zoom", "crop"])
def test_layer_seed_draws_the_same_whatever_the_model_seed(make):
    x, y = data(n=12)
    # The layer's images: the key layer_seed_key(seed), stream = the step (not the layer's index).
    m = hpcnn.Sequential([InputLayer(input_shape=(6, 6, 2)), Rescaling(1.0), make(77), Flatten(),
                          Dense(3, activation="softmax")], seed=1)
    m.build()
    layer = m.layers[1]
    aug = ops.augment(x, layer.core_config(), seed=layer_seed_key(77), stream=1)
    plain = hpcnn.Sequential([InputLayer(input_shape=aug.shape[1:]), Flatten(), Dense(3, activation="softmax")], seed=1)
    plain.build()
    plain.set_weights(m.get_weights())
    w0 = m.get_weights()
    for a, b in zip(trained(m, x, y), trained(plain, aug, y)):
        np.testing.assert_array_equal(a, b)

    # At the model's start (the batch stager's pass), under two model seeds: the same training.
    def run(model_seed, layer_seed):
        net = hpcnn.Sequential([InputLayer(input_shape=(6, 6, 2)), make(layer_seed), Flatten(),
                                Dense(3, activation="softmax")], seed=model_seed)
        net.build()
        net.set_weights(w0)
        return trained(net, x, y, batch_size=4, epochs=2)
    for a, b in zip(run(1, 77), run(2, 77)):
        np.testing.assert_array_equal(a, b)
    assert not all(np.array_equal(a, b) for a, b in zip(run(1, 77), run(1, 78)))
    assert not all(np.array_equal(a, b) for a, b in zip(run(1, None), run(2, None)))


def test_config_round_trip_and_save_load_keep_seed(tmp_path):
    layers = [RandomRotation((0.3, -0.1), fill_mode="constant", fill_value=0.5, seed=2**63 + 5, name="rot"),
              RandomZoom(0.2, interpolation="nearest", seed=3), RandomZoom((-0.2, 0.1), (0.1, 0.3)),
              RandomFlip(seed=0), ZeroPadding2D(1), RandomCrop(6, 6, seed=12)]
    m = head_model(layers)
    cfg = m.get_config()
    again = hpcnn.Sequential.from_config(cfg)
    assert again.get_config() == cfg
    r, z, z2 = again.layers[:3]
    assert (r.factor, r.fill_mode, r.fill_value, r.interpolation, r.seed) == ((-0.1, 0.3), "constant", 0.5,
                                                                              "bilinear", 2**63 + 5)
    assert (z.height_factor, z.width_factor, z.interpolation, z.seed) == (0.2, None, "nearest", 3)
    assert (z2.height_factor, z2.width_factor, z2.seed) == ([-0.2, 0.1], [0.1, 0.3], None)
    assert again.layers[3].seed == 0 and again.layers[5].seed == 12
    x, y = data(n=6)
    trained(m, x, y)
    for name in ("m.h5", "m.keras"):
        m.save(str(tmp_path / name))
        loaded = hpcnn.saving.load_model(str(tmp_path / name))
        assert loaded.get_config() == cfg
        np.testing.assert_array_equal(loaded.predict(x, verbose=0), m.predict(x, verbose=0))
    # The keras names.
    import hpcnn.keras as hk
    assert hk.layers.RandomRotation is RandomRotation and hk.layers.RandomZoom is RandomZoom
    with pytest.raises(NotImplementedError, match="RandomContrast.*RandomRotation, RandomZoom"):
        hk.layers.RandomContrast


def test_bad_arguments_name_the_layer():
    with pytest.raises(ValueError, match=r"RandomRotation: The `factor` argument.*Received: factor=1.5"):
        RandomRotation(1.5)
    with pytest.raises(ValueError, match=r"RandomRotation.*Received: factor=\(1.5, 2\)"):
        RandomRotation((1.5, 2))
    with pytest.raises(ValueError, match=r"RandomRotation.*factor=\(0.1, 0.2, 0.3\)"):
        RandomRotation((0.1, 0.2, 0.3))
    assert RandomRotation((-3, 0.5)).factor == (-3.0, 0.5)  # Keras only asks that the range meet [-1, 1]
    with pytest.raises(ValueError, match=r"RandomZoom: The `height_factor`.*\(-1.0, 1.0\].*height_factor=-1"):
        RandomZoom(-1)
    with pytest.raises(ValueError, match=r"RandomZoom.*width_factor=\(0.1, 1.2\)"):
        RandomZoom(0.1, (0.1, 1.2))
    with pytest.raises(ValueError, match=r"RandomRotation: Unknown `fill_mode` 'mirror'"):
        RandomRotation(0.1, fill_mode="mirror")
    with pytest.raises(ValueError, match=r"RandomZoom: Unknown `interpolation` 'bicubic'"):
        RandomZoom(0.1, interpolation="bicubic")
    with pytest.raises(ValueError, match=r"RandomZoom.*fill_value"):
        RandomZoom(0.1, fill_value=float("nan"))
    with pytest.raises(ValueError, match=r"seed.*-1"):
        RandomRotation(0.1, seed=-1)
    with pytest.raises(ValueError, match=r"seed.*1.5"):
        RandomFlip(seed=1.5)
    with pytest.raises(ValueError, match="NHWC only"):
        RandomZoom(0.1, data_format="channels_first")
    with pytest.raises(ValueError, match="RandomRotation comes after Conv2D"):
        hpcnn.Sequential([InputLayer(input_shape=(4, 4, 1)), Conv2D(2, 1), RandomRotation(0.1)]).build()
    with pytest.raises(ValueError, match="RandomZoom expects images"):
        hpcnn.Sequential([InputLayer(input_shape=(4,)), RandomZoom(0.1)]).build()
    with pytest.raises(ValueError, match="RandomZoom: factors must be in"):
        ops.augment(images(), zoom(-0.5, 1.5))
