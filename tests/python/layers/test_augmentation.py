"""The augmentation layers (issue 13): RandomFlip, RandomTranslation, RandomCrop.

- The op (hpcnn._core.ops.augment) against a NumPy reference written here from the documented
  rule (csrc/ops/augment.h): the per-sample draws are Philox4x32-10 words of (seed, stream, global
  row), the geometry is Keras 3's (flip, shift by a fraction of the size with its fill modes and
  interpolations, crop from the zero-padded input); inference is the identity (a crop: the centre).
- In a model: active in fit only; evaluate/predict see the images unchanged; the images a training
  step sees are the op's with the model's seed, the step number and the layer's index, whether the
  layer runs in the batch pipeline (at the model's start) or as an op (after a Rescaling); the same
  with any thread count, from uint8 or float32 input, after save/load and on resume.
- Configs round-trip; bad arguments and bad placement are ValueErrors naming the layer."""
import io
import contextlib

import numpy as np
import pytest

import hpcnn
from hpcnn import _core, optimizers
from hpcnn.training import prepare_inputs, prepare_targets
from hpcnn.layers import (Activation, Add, Concatenate, Conv2D, Dense, Flatten, InputLayer, RandomCrop, RandomFlip,
                          RandomTranslation, Rescaling, ZeroPadding2D)
from tests.support.augmentation_reference import philox_words, unit

ops = _core.ops
# ------------------------------------------------------------------ NumPy reference
def fix(i, size, mode):
    if 0 <= i < size:
        return i
    if mode == "nearest":
        return 0 if i < 0 else size - 1
    if mode == "wrap":
        return i % size
    if mode == "reflect":
        k = i % (2 * size)
        return 2 * size - 1 - k if k >= size else k
    return -1  # constant


def f32_fma(a, b, c):
    return np.float32(float(np.float32(a)) * float(np.float32(b)) + float(np.float32(c)))


def axis_taps(base, direction, coef, size, o, mode, interp):
    src = f32_fma(coef, size, base + direction * o)
    if interp == "nearest":
        r = np.floor(abs(float(src)) + 0.5) * np.sign(float(src))  # halves away from zero
        return [(fix(int(r), size, mode), 1.0)]
    lower = np.floor(float(src))
    frac = float(src) - lower
    i = int(lower)
    if frac == 0:
        return [(fix(i, size, mode), 1.0)]
    return [(fix(i, size, mode), 1.0 - frac), (fix(i + 1, size, mode), frac)]


def reference(x, cfg, training, seed=0, stream=0, first_row=0, padding=(0, 0, 0, 0)):
    """What csrc/ops/augment.h documents, in float64 (x: (n, h, w, c))."""
    x = np.asarray(x, np.float64)
    n, h, w, c = x.shape
    kind = cfg["class_name"]
    top, bottom, left, right = padding
    oh, ow = (cfg["height"], cfg["width"]) if kind == "RandomCrop" else (h, w)
    mode = cfg.get("fill_mode", "constant") if kind == "RandomTranslation" else "constant"
    fill = cfg.get("fill_value", 0.0) if kind == "RandomTranslation" else 0.0
    interp = cfg.get("interpolation", "nearest") if kind == "RandomTranslation" else "nearest"
    words = philox_words(seed, stream, first_row + np.arange(n))
    y = np.empty((n, oh, ow, c))
    for s in range(n):
        rows, cols = (0, 1, 0.0), (0, 1, 0.0)  # base, direction, coef
        if kind == "RandomCrop":
            rh, rw = h + top + bottom - oh, w + left + right - ow
            oy = (int(words[s, 0]) >> 8) * (rh + 1) >> 24 if training else rh // 2
            ox = (int(words[s, 1]) >> 8) * (rw + 1) >> 24 if training else rw // 2
            rows, cols = (oy - top, 1, 0.0), (ox - left, 1, 0.0)
        elif training and kind == "RandomFlip":
            if unit(words[s, 0]) <= 0.5:
                if cfg["mode"] != "horizontal":
                    rows = (h - 1, -1, 0.0)
                if cfg["mode"] != "vertical":
                    cols = (w - 1, -1, 0.0)
        elif training:
            fh = f32_fma(unit(words[s, 0]), np.float32(cfg["height_hi"]) - np.float32(cfg["height_lo"]),
                         cfg["height_lo"])
            fw = f32_fma(unit(words[s, 1]), np.float32(cfg["width_hi"]) - np.float32(cfg["width_lo"]),
                         cfg["width_lo"])
            rows, cols = (0, 1, -fh), (0, 1, -fw)
        for oy_ in range(oh):
            ty = axis_taps(*rows, h, oy_, mode, interp)
            for ox_ in range(ow):
                tx = axis_taps(*cols, w, ox_, mode, interp)
                v = np.zeros(c)
                for iy, wy in ty:
                    for ix, wx in tx:
                        v += wy * wx * (fill if iy < 0 or ix < 0 else x[s, iy, ix])
                y[s, oy_, ox_] = v
    return y


def images(n=5, h=7, w=6, c=3, seed=0):
    return np.random.default_rng(seed).standard_normal((n, h, w, c)).astype(np.float32)


FLIPS = [dict(class_name="RandomFlip", mode=m) for m in ("horizontal", "vertical", "horizontal_and_vertical")]
TRANSLATIONS = [dict(class_name="RandomTranslation", height_lo=-0.9, height_hi=0.6, width_lo=-0.3, width_hi=1.0,
                     fill_mode=m, fill_value=0.25, interpolation=i)
                for m in ("constant", "reflect", "wrap", "nearest") for i in ("nearest", "bilinear")]
CROPS = [dict(class_name="RandomCrop", height=5, width=4), dict(class_name="RandomCrop", height=7, width=6)]


# ------------------------------------------------------------------ the op
@pytest.mark.parametrize("cfg", FLIPS + TRANSLATIONS + CROPS, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize("training", [True, False])
def test_op_matches_numpy_reference(cfg, training):
    x = images()
    kw = dict(seed=2**40 + 7, stream=3 * 1024 + 2, first_row=1000)
    got = ops.augment(x, cfg, training=training, **kw)
    want = reference(x, cfg, training, **kw)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    if cfg.get("interpolation", "nearest") == "nearest":  # pure copies: exactly the input's values
        np.testing.assert_array_equal(got, want.astype(np.float32))


def test_crop_from_padding_matches_reference_and_explicit_padding():
    x = images(n=9, h=8, w=8, c=2)
    cfg = dict(class_name="RandomCrop", height=8, width=8)
    for training in (True, False):
        got = ops.augment(x, cfg, training=training, seed=5, stream=9, padding=[4, 4, 3, 5])
        np.testing.assert_array_equal(got, reference(x, cfg, training, 5, 9, padding=(4, 4, 3, 5)))
        padded = np.pad(x, ((0, 0), (4, 4), (3, 5), (0, 0)))
        np.testing.assert_array_equal(got, ops.augment(padded, cfg, training=training, seed=5, stream=9))
    # Inference: the centre of the symmetrically padded image is the image itself.
    np.testing.assert_array_equal(ops.augment(x, cfg, training=False, padding=[4, 4, 4, 4]), x)


def test_keras_semantics_without_the_reference():
    x = images(n=64, h=6, w=5, c=1)
    y = ops.augment(x, FLIPS[0], seed=1, stream=0)
    flipped = [np.array_equal(y[i], x[i, :, ::-1]) for i in range(64)]
    same = [np.array_equal(y[i], x[i]) for i in range(64)]
    assert all(a or b for a, b in zip(flipped, same)) and 10 < sum(flipped) < 54
    y = ops.augment(x, FLIPS[2], seed=1, stream=0)
    assert all(np.array_equal(y[i], x[i, ::-1, ::-1]) or np.array_equal(y[i], x[i]) for i in range(64))
    # A whole-pixel shift with constant fill: the image moves, zeros come in.
    img = np.arange(1, 26, dtype=np.float32).reshape(1, 5, 5, 1)
    t = dict(class_name="RandomTranslation", height_lo=0.4, height_hi=0.4, width_lo=-0.2, width_hi=-0.2,
             fill_mode="constant", fill_value=0.0, interpolation="nearest")
    want = np.zeros_like(img)
    want[0, 2:, :4] = img[0, :3, 1:]  # down by 2 rows, left by 1 column
    np.testing.assert_array_equal(ops.augment(img, t), want)
    # Every training crop is a window of the padded image.
    x = images(n=32, h=4, w=4, c=1)
    padded = np.pad(x, ((0, 0), (2, 2), (2, 2), (0, 0)))
    y = ops.augment(x, dict(class_name="RandomCrop", height=4, width=4), seed=3, padding=[2, 2, 2, 2])
    offsets = set()
    for i in range(32):
        hits = [(a, b) for a in range(5) for b in range(5) if np.array_equal(padded[i, a:a + 4, b:b + 4], y[i])]
        assert hits
        offsets.update(hits)
    assert len(offsets) > 5


def test_draws_depend_on_global_row_not_on_batch_split_or_threads():
    x = images(n=40, h=6, w=6, c=2)
    cfg = TRANSLATIONS[3]
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
    for cfg in (FLIPS[2], TRANSLATIONS[5], CROPS[0]):
        want = ops.augment(decoded[rows], cfg, seed=3, stream=1, first_row=20)
        got = ops.augment(u8, cfg, seed=3, stream=1, first_row=20, rows=rows, scale=scale, shift=shift)
        np.testing.assert_array_equal(got, want)
        got = ops.augment(decoded, cfg, seed=3, stream=1, first_row=20, rows=rows)
        np.testing.assert_array_equal(got, want)


def test_op_bad_input():
    x = images()
    with pytest.raises(ValueError, match="RandomCrop.*smaller than the crop"):
        ops.augment(x, dict(class_name="RandomCrop", height=8, width=6))
    with pytest.raises(ValueError, match="4-D"):
        ops.augment(x[0], FLIPS[0])
    with pytest.raises(ValueError, match="row index 10"):
        ops.augment(x, FLIPS[0], rows=[0, 10])
    with pytest.raises(ValueError, match="RandomTranslation.*\\[-1, 1\\]"):
        ops.augment(x, dict(TRANSLATIONS[0], height_hi=1.5))
    with pytest.raises(ValueError, match="unknown augmentation"):
        ops.augment(x, dict(class_name="RandomContrast"))


# ------------------------------------------------------------------ in a model
def core_index(model, layer):
    """The core index of a Keras-level layer's first core layer (the core's lowering, core_layers)."""
    position = [la for la, _ in model.graph_nodes()].index(layer)
    return sum(len(c) for c in model.core.core_layers[:position])


def stream_of(model, layer):
    """The core index of a Keras-level layer (its augmentation stream is step * 1024 + index)."""
    return core_index(model, layer)


def head_model(front, shape=(6, 6, 2), seed=3, classes=3):
    return hpcnn.Sequential([InputLayer(input_shape=shape), *front, Flatten(), Dense(classes, activation="softmax")], seed=seed)


def one_step_weights(model, x, y, batch_size=None, epochs=1, **fit):
    model.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    with contextlib.redirect_stdout(io.StringIO()):
        model.fit(x, y, batch_size=batch_size or len(x), epochs=epochs, shuffle=False, verbose=0, **fit)
    return model.get_weights()


def data(n=8, shape=(6, 6, 2), seed=0):
    r = np.random.default_rng(seed)
    return r.standard_normal((n, *shape)).astype(np.float32), r.integers(0, 3, n)


@pytest.mark.parametrize("front", [
    lambda: [RandomFlip("horizontal")],
    lambda: [RandomTranslation(0.3, (-0.2, 0.5), fill_mode="constant", fill_value=0.5)],
    lambda: [RandomFlip("horizontal_and_vertical"), RandomTranslation(0.2, 0.2, interpolation="nearest")],
    lambda: [Rescaling(1.0), RandomFlip("vertical")],  # after a Rescaling: an op of the step
], ids=["flip", "translation", "flip+translation", "after-rescaling"])
def test_training_step_sees_the_documented_augmentation(front):
    x, y = data(n=8)
    layers = front()
    m = head_model(layers)
    m.build()
    # The same head trained on the batch augmented with the op by the documented keys (step 1).
    aug = x
    for layer in layers:
        if not isinstance(layer, (RandomFlip, RandomTranslation)):
            continue
        aug = ops.augment(aug, layer.core_config(), seed=m.seed, stream=1 * 1024 + stream_of(m, layer))
    w0 = m.get_weights()
    plain = head_model([], seed=3)
    plain.build()
    plain.set_weights(w0)
    w_aug = one_step_weights(m, x, y)
    w_ref = one_step_weights(plain, aug, y)
    for a, b in zip(w_aug, w_ref):
        np.testing.assert_array_equal(a, b)
    # And the augmentation did change something (else this test would prove nothing).
    assert not np.array_equal(aug, x)
    unaugmented = head_model([], seed=3)
    unaugmented.build()
    unaugmented.set_weights(w0)
    assert not all(np.array_equal(a, b) for a, b in zip(one_step_weights(unaugmented, x, y), w_ref))


def test_padded_crop_at_the_start_trains_on_windows_and_predicts_on_the_original():
    x, y = data(n=8, shape=(6, 6, 2))
    m = head_model([ZeroPadding2D(2), RandomCrop(6, 6)])
    m.build()
    crop = m.layers[1]
    assert [s for _, s, _ in m.layer_outputs()][:2] == [(10, 10, 2), (6, 6, 2)]
    aug = ops.augment(x, crop.core_config(), seed=m.seed, stream=1024 + stream_of(m, crop), padding=[2, 2, 2, 2])
    plain = head_model([], seed=3)
    plain.build()
    plain.set_weights(m.get_weights())
    for a, b in zip(one_step_weights(m, x, y), one_step_weights(plain, aug, y)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(m.predict(x, verbose=0), plain.predict(x, verbose=0))


def test_identity_at_inference():
    x, y = data(n=10)
    m = head_model([RandomFlip(), RandomTranslation(0.5, 0.5), ZeroPadding2D(1), RandomCrop(6, 6)])
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    plain = head_model([], seed=3)
    plain.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy", metrics=["accuracy"])
    plain.set_weights(m.get_weights())
    np.testing.assert_array_equal(m.predict(x, batch_size=3, verbose=0), plain.predict(x, batch_size=3, verbose=0))
    assert m.evaluate(x, y, batch_size=4, verbose=0) == plain.evaluate(x, y, batch_size=4, verbose=0)
    np.testing.assert_array_equal(m.predict_on_batch(x), plain.predict_on_batch(x))


def test_a_centre_crop_at_inference():
    x, _ = data(n=4, shape=(8, 8, 2))
    m = hpcnn.Sequential([InputLayer(input_shape=(8, 8, 2)), RandomCrop(5, 4), Flatten(), Dense(2, activation="softmax")], seed=1)
    plain = hpcnn.Sequential([InputLayer(input_shape=(5, 4, 2)), Flatten(), Dense(2, activation="softmax")], seed=1)
    plain.build()
    m.build()
    plain.set_weights(m.get_weights())
    np.testing.assert_allclose(m.predict(x, verbose=0), plain.predict(x[:, 1:6, 2:6], verbose=0), rtol=0, atol=0)


def test_deterministic_per_seed_thread_count_and_dtype_with_several_steps_and_epochs():
    x, y = data(n=24)
    front = lambda: [RandomFlip(), RandomTranslation(0.3, 0.3, fill_mode="wrap")]  # noqa: E731
    w1 = one_step_weights(head_model(front(), seed=9), x, y, batch_size=5, epochs=2)
    old = hpcnn.get_num_threads()
    try:
        hpcnn.set_num_threads(1)
        w2 = one_step_weights(head_model(front(), seed=9), x, y, batch_size=5, epochs=2)
    finally:
        hpcnn.set_num_threads(old)
    for a, b in zip(w1, w2):
        np.testing.assert_array_equal(a, b)
    w3 = one_step_weights(head_model(front(), seed=10), x, y, batch_size=5, epochs=2)
    assert not all(np.array_equal(a, b) for a, b in zip(w1, w3))
    # uint8 input: decoded and augmented in one pass, the same as augmenting the decoded floats.
    u8 = np.random.default_rng(1).integers(0, 256, (24, 6, 6, 2), dtype=np.uint8)
    f = u8.astype(np.float32)
    wu = one_step_weights(head_model(front(), seed=9), u8, y, batch_size=5, epochs=2)
    wf = one_step_weights(head_model(front(), seed=9), f, y, batch_size=5, epochs=2)
    for a, b in zip(wu, wf):
        np.testing.assert_array_equal(a, b)


def test_resumed_run_augments_as_the_uninterrupted_one(tmp_path):
    x, y = data(n=20)
    front = lambda: [RandomFlip(), ZeroPadding2D(2), RandomCrop(6, 6)]  # noqa: E731
    full = one_step_weights(head_model(front(), seed=4), x, y, batch_size=6, epochs=2)
    m = head_model(front(), seed=4)
    one_step_weights(m, x, y, batch_size=6, epochs=1)
    m.save(str(tmp_path / "half.h5"))
    m2 = hpcnn.saving.load_model(str(tmp_path / "half.h5"))
    with contextlib.redirect_stdout(io.StringIO()):
        m2.fit(x, y, batch_size=6, epochs=2, initial_epoch=1, shuffle=False, verbose=0)
    for a, b in zip(full, m2.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_config_round_trip_and_save_load(tmp_path):
    layers = [RandomFlip("vertical", name="flip"),
              RandomTranslation((-0.1, 0.2), 0.3, fill_mode="nearest", interpolation="nearest", fill_value=1.5),
              ZeroPadding2D(((1, 2), (3, 0))), RandomCrop(6, 6)]
    m = head_model(layers)
    cfg = m.get_config()
    again = hpcnn.Sequential.from_config(cfg)
    assert again.get_config() == cfg
    kinds = [type(l).__name__ for l in again.layers]
    assert kinds[:4] == ["RandomFlip", "RandomTranslation", "ZeroPadding2D", "RandomCrop"]
    t = again.layers[1]
    assert (t.height_factor, t.width_factor, t.fill_mode, t.interpolation, t.fill_value) == (
        [-0.1, 0.2], 0.3, "nearest", "nearest", 1.5)
    x, y = data(n=6)
    one_step_weights(m, x, y)
    m.save(str(tmp_path / "m.h5"))
    loaded = hpcnn.saving.load_model(str(tmp_path / "m.h5"))
    assert loaded.get_config() == cfg
    np.testing.assert_array_equal(loaded.predict(x, verbose=0), m.predict(x, verbose=0))
    with contextlib.redirect_stdout(io.StringIO()) as out:
        m.summary()
    assert "RandomTranslation" in out.getvalue() and "RandomCrop" in out.getvalue()


def test_bad_arguments_name_the_layer():
    with pytest.raises(ValueError, match="RandomFlip.*unknown mode"):
        RandomFlip("diagonal")
    with pytest.raises(ValueError, match="RandomTranslation.*factor"):
        RandomTranslation(1.5, 0.1)
    with pytest.raises(ValueError, match="RandomTranslation.*factor"):
        RandomTranslation((0.1, 0.2, 0.3), 0.1)
    with pytest.raises(ValueError, match="RandomTranslation.*fill_mode"):
        RandomTranslation(0.1, 0.1, fill_mode="mirror")
    with pytest.raises(ValueError, match="RandomTranslation.*interpolation"):
        RandomTranslation(0.1, 0.1, interpolation="bicubic")
    with pytest.raises(ValueError, match="RandomCrop"):
        RandomCrop(0, 4)
    with pytest.raises(ValueError, match="seed"):
        RandomFlip(seed=-3)
    with pytest.raises(ValueError, match="smaller than the crop"):
        head_model([RandomCrop(7, 6)]).build()
    with pytest.raises(ValueError, match="RandomFlip comes after Conv2D"):
        hpcnn.Sequential([InputLayer(input_shape=(4, 4, 1)), Conv2D(2, 1), RandomFlip()]).build()
    with pytest.raises(ValueError, match="RandomFlip expects images"):
        hpcnn.Sequential([InputLayer(input_shape=(4,)), RandomFlip()]).build()


def test_a_batch_staged_for_another_step_is_refused():
    x, y = data(n=4)
    m = head_model([RandomFlip()])
    m.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    core = m.core
    batch = (prepare_inputs(x), prepare_targets(m, y))
    core.train_step(batch, batch)  # stages the next batch for training step 2
    with pytest.raises(ValueError, match="augmented for training step 2"):
        core.test_step(None, None)
    core.train_step(batch, None)  # staging the batch afresh works


# ------------------------------------------------------------------ in a functional model
def node_stream(model, layer, step=1):
    """The augmentation stream of `layer` in a functional model: step * 1024 + its core index."""
    return step * 1024 + core_index(model, layer)


def residual_head(inp, seed):
    """Conv -> (Conv, identity) -> Add -> Flatten -> Dense: a graph with a branch and a merge."""
    a = Conv2D(3, 3, padding="same", activation="relu")(inp)
    b = Conv2D(3, 3, padding="same")(a)
    out = Dense(3, activation="softmax")(Flatten()(Activation("relu")(Add()([a, b]))))
    return out


def test_functional_model_leading_augmentation_trains_on_the_ops_output():
    # Input -> ZeroPadding2D(4) -> RandomCrop -> RandomFlip -> a residual head: the chain after the
    # Input is the stager's (the crop reads the padded input in one pass); the step sees exactly
    # the op's images.
    x, y = data(n=8, shape=(6, 6, 2))
    inp = hpcnn.Input(shape=(6, 6, 2))
    crop, flip = RandomCrop(6, 6), RandomFlip("horizontal")
    m = hpcnn.Model(inp, residual_head(flip(crop(ZeroPadding2D(4)(inp))), 0), seed=5)
    m.build()
    pinp = hpcnn.Input(shape=(6, 6, 2))
    plain = hpcnn.Model(pinp, residual_head(pinp, 0), seed=5)
    plain.build()
    plain.set_weights(m.get_weights())
    aug = ops.augment(x, crop.core_config(), seed=m.seed, stream=node_stream(m, crop), padding=[4, 4, 4, 4])
    aug = ops.augment(aug, flip.core_config(), seed=m.seed, stream=node_stream(m, flip))
    assert not np.array_equal(aug, x)
    w0 = m.get_weights()
    for a, b in zip(one_step_weights(m, x, y), one_step_weights(plain, aug, y)):
        np.testing.assert_array_equal(a, b)
    # Inference: the crop takes the centre of the padded image (the original), the flip is the identity.
    np.testing.assert_array_equal(m.predict(x, verbose=0), plain.predict(x, verbose=0))
    # Several steps and epochs, staged ahead: the same weights as stepping the op's batches by hand.
    m2 = hpcnn.Model.from_config(m.get_config())
    m2.build()
    m2.set_weights(w0)
    ref = hpcnn.Model.from_config(plain.get_config())
    ref.build()
    ref.set_weights(w0)
    w_m2 = one_step_weights(m2, x, y, batch_size=4, epochs=2)
    ref.compile(optimizers.SGD(0.1), "sparse_categorical_crossentropy")
    crop2, flip2 = m2.get_layer(crop.name), m2.get_layer(flip.name)
    for step in range(1, 5):
        rows = slice(((step - 1) % 2) * 4, ((step - 1) % 2) * 4 + 4)
        first_row = 0  # each step's batch starts the step's global batch
        b = ops.augment(x[rows], crop2.core_config(), seed=m2.seed, stream=node_stream(m2, crop2, step),
                        first_row=first_row, padding=[4, 4, 4, 4])
        b = ops.augment(b, flip2.core_config(), seed=m2.seed, stream=node_stream(m2, flip2, step),
                        first_row=first_row)
        ref.train_on_batch(b, y[rows])
    for a, b in zip(w_m2, ref.get_weights()):
        np.testing.assert_array_equal(a, b)
    # The chain is the stager's (not ops of the step): a batch it augmented for training step 2
    # is refused by an evaluation.
    core = m2.core
    batch = (prepare_inputs(x), prepare_targets(m2, y))
    core.train_step(batch, batch)
    with pytest.raises(ValueError, match="augmented for training step"):
        core.test_step(None, None)


def test_functional_augmentation_on_a_branch_of_the_input_runs_as_an_op():
    # The input also feeds a plain branch: the flip is not the stager's (it would change both
    # branches' input) but an op of the step; the other branch sees the images as given.
    x, y = data(n=8, shape=(6, 6, 2))
    inp = hpcnn.Input(shape=(6, 6, 2))
    flip = RandomFlip("horizontal_and_vertical")
    both = Concatenate()([Flatten()(flip(inp)), Flatten()(inp)])
    m = hpcnn.Model(inp, Dense(3, activation="softmax")(both), seed=2)
    m.build()
    flat = hpcnn.Sequential([InputLayer(input_shape=(144,)), Dense(3, activation="softmax")], seed=2)
    flat.build()
    flat.set_weights(m.get_weights())
    aug = ops.augment(x, flip.core_config(), seed=m.seed, stream=node_stream(m, flip))
    assert not np.array_equal(aug, x)
    joined = np.concatenate([aug.reshape(8, -1), x.reshape(8, -1)], axis=1)
    for a, b in zip(one_step_weights(m, x, y), one_step_weights(flat, joined, y)):
        np.testing.assert_array_equal(a, b)


def test_functional_augmentation_after_weights_is_refused():
    inp = hpcnn.Input(shape=(4, 4, 1))
    c = Conv2D(1, 1)(inp)
    out = Add()([RandomFlip()(c), inp])  # the flip is downstream of the Conv2D on one branch
    with pytest.raises(ValueError, match="RandomFlip comes after Conv2D"):
        hpcnn.Model(inp, Flatten()(out)).build()
