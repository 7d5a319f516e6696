"""`layer.trainable = False` and the callback aliases (issue 12, item 11).

Frozen layers take no optimizer step: their parameters and their optimizer state (Adam's moments,
SGD's velocity) stay exactly as they were; summary() counts them as non-trainable. As in Keras,
a change of `trainable` takes effect at the next compile() (fit warns when it was changed after).
"""
import warnings

import numpy as np
import pytest

import hpcnn
from hpcnn import _core, callbacks, optimizers
from hpcnn.layers import Conv2D, Dense, Flatten, InputLayer, MaxPooling2D
from tests.support.small_models import small_model


def data(n=32, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    return rng.random((n, 8, 8, 2), dtype=np.float32), rng.integers(0, classes, n)


def param_ranges(model):
    """[(begin, end)] of each Keras layer's parameters in the core's parameter buffer (Conv2D and
    Dense only; get_weights order)."""
    out, offset = {}, 0
    weights = model.get_weights()
    k = 0
    for layer in model.layers:
        if isinstance(layer, (Conv2D, Dense)):
            n = weights[k].size + weights[k + 1].size
            out[layer.name] = (offset, offset + n)
            offset, k = offset + n, k + 2
    return out


@pytest.mark.parametrize("optimizer", [optimizers.Adam(0.01), optimizers.SGD(0.05, momentum=0.9)],
                         ids=["adam", "sgd-momentum"])
@pytest.mark.parametrize("frozen", [["conv2d"], ["dense"], ["conv2d", "dense_1"]])
def test_frozen_layers_take_no_optimizer_step(optimizer, frozen):
    x, y = data()
    m = small_model()
    for layer in m.layers:
        if layer.name in frozen:
            layer.trainable = False
    m.compile(optimizer, "sparse_categorical_crossentropy")
    before = m.core.parameter_buffer().copy()
    m.fit(x, y, batch_size=8, epochs=2, verbose=0)
    after = m.core.parameter_buffer()
    state = list(m.core.optimizer_state().values())
    assert state, "the optimizer took no step"
    for name, (b, e) in param_ranges(m).items():
        if name in frozen:
            np.testing.assert_array_equal(after[b:e], before[b:e], err_msg=name)
            for s in state:  # Adam's m and v, SGD's velocity: never touched
                assert not s[b:e].any(), name
        else:
            assert (after[b:e] != before[b:e]).any(), name
            assert all(s[b:e].any() for s in state), name
    assert m.core.iterations == 8  # frozen layers or not, each batch is one optimizer step


def test_frozen_first_layers_need_no_backward():
    """Backward stops at the first trainable layer: a frozen conv base gets no gradient work."""
    x, y = data()
    m = small_model()
    m.layers[0].trainable = False  # the only conv layer
    m.compile("adam", "sparse_categorical_crossentropy")
    m.train_on_batch(x, y)
    b, e = param_ranges(m)["conv2d"]
    grads = m.core.gradient_buffer()
    assert not grads[b:e].any() and grads[e:].any()


def test_frozen_training_matches_training_with_the_frozen_weights_put_back():
    """The trainable layers get exactly the updates they would get if the frozen ones were
    restored after every step (so freezing changes nothing else)."""
    x, y = data()
    frozen = small_model(seed=5)
    frozen.layers[0].trainable = False
    frozen.compile(optimizers.SGD(0.05), "sparse_categorical_crossentropy")
    ref = small_model(seed=5)
    ref.compile(optimizers.SGD(0.05), "sparse_categorical_crossentropy")
    w0 = ref.get_weights()
    for i in range(0, 32, 8):
        frozen.train_on_batch(x[i:i + 8], y[i:i + 8])
        ref.train_on_batch(x[i:i + 8], y[i:i + 8])
        ref.set_weights(w0[:2] + ref.get_weights()[2:])
    for a, b in zip(frozen.get_weights(), ref.get_weights()):
        np.testing.assert_array_equal(a, b)


def test_summary_counts_trainable_and_non_trainable_params():
    m = small_model()
    lines = []
    m.summary(print_fn=lines.append)
    total = m.count_params()
    assert f"Trainable params: {total:,} (" in "\n".join(lines)
    assert "Non-trainable params: 0 (" in "\n".join(lines)
    m.layers[0].trainable = False
    conv = m.layers[0].count_params((8, 8, 2))
    lines = []
    m.summary(print_fn=lines.append)
    text = "\n".join(lines)
    assert f"Total params: {total:,} (" in text
    assert f"Trainable params: {total - conv:,} (" in text
    assert f"Non-trainable params: {conv:,} (" in text


def test_model_trainable_false_freezes_everything():
    x, y = data()
    m = small_model()
    m.trainable = False
    assert not any(layer.trainable for layer in m.layers)
    m.compile("adam", "sparse_categorical_crossentropy")
    assert m.core.num_trainable_params == 0
    before = m.get_weights()
    m.fit(x, y, batch_size=8, verbose=0)
    for a, b in zip(m.get_weights(), before):
        np.testing.assert_array_equal(a, b)
    lines = []
    m.summary(print_fn=lines.append)
    assert "Trainable params: 0 (" in "\n".join(lines)
    m.trainable = True
    m.compile("adam", "sparse_categorical_crossentropy")
    assert m.core.num_trainable_params == m.count_params()


def test_trainable_takes_effect_at_the_next_compile_as_in_keras():
    x, y = data()
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.layers[0].trainable = False  # after compile: not yet in effect
    b, e = param_ranges(m)["conv2d"]
    before = m.core.parameter_buffer().copy()
    with pytest.warns(UserWarning, match=r"changed after compile\(\).*call compile\(\) again"):
        m.fit(x, y, batch_size=8, verbose=0)
    assert (m.core.parameter_buffer()[b:e] != before[b:e]).any()  # still trained, as compiled
    lines = []
    m.summary(print_fn=lines.append)
    assert any("call compile() again" in line for line in lines)
    m.compile("adam", "sparse_categorical_crossentropy")  # now frozen
    frozen_at = m.core.parameter_buffer().copy()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no warning once compiled with the flag
        m.fit(x, y, batch_size=8, verbose=0)
    np.testing.assert_array_equal(m.core.parameter_buffer()[b:e], frozen_at[b:e])


def test_trainable_survives_config_clone_and_save(tmp_path):
    x, y = data()
    m = small_model()
    m.layers[3].trainable = False  # dense
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=8, verbose=0)
    assert m.get_config()["layers"][4]["config"]["trainable"] is False  # [0] is the InputLayer
    assert not hpcnn.models.clone_model(m).layers[3].trainable
    path = str(tmp_path / "m.h5")
    m.save(path)
    loaded = hpcnn.models.load_model(path)
    assert [layer.trainable for layer in loaded.layers] == [layer.trainable for layer in m.layers]
    assert loaded.core.num_trainable_params == m.core.num_trainable_params < m.count_params()
    whole = hpcnn.Sequential([InputLayer(input_shape=[4]), Dense(3, activation="softmax")], trainable=False)
    assert not hpcnn.Sequential.from_config(whole.get_config()).trainable
    assert "trainable=False" in repr(Dense(3, trainable=False)) and "trainable" not in repr(Dense(3))


def test_layers_without_weights_may_be_frozen():
    m = hpcnn.Sequential([InputLayer(input_shape=[6, 6, 1]), Conv2D(2, 3), MaxPooling2D(2, trainable=False),
                          Flatten(trainable=False), Dense(2, activation="softmax")])
    m.compile("sgd", "sparse_categorical_crossentropy")
    assert m.core.num_trainable_params == m.count_params()


# ------------------------------------------------------------------ callbacks: Keras' batch aliases
def test_on_batch_begin_and_end_are_called():
    x, y = data()
    seen = []

    class Old(callbacks.Callback):  # Keras 1/2 style: overrides the short names
        def on_batch_begin(self, batch, logs=None):
            seen.append(("begin", batch))

        def on_batch_end(self, batch, logs=None):
            seen.append(("end", batch, sorted(logs)))

    lam = []
    cb = callbacks.LambdaCallback(on_batch_begin=lambda batch, logs: lam.append(("b", batch)),
                                  on_batch_end=lambda batch, logs: lam.append(("e", batch, logs["loss"] > 0)),
                                  on_train_begin=lambda logs: lam.append("train_begin"),
                                  on_epoch_begin=lambda epoch, logs: lam.append(("epoch", epoch)),
                                  on_train_end=lambda logs: lam.append(("train_end", sorted(logs))))
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"])
    m.fit(x, y, batch_size=16, epochs=1, verbose=0, callbacks=[Old(), cb])
    assert seen == [("begin", 0), ("end", 0, ["accuracy", "loss"]), ("begin", 1), ("end", 1, ["accuracy", "loss"])]
    assert lam == ["train_begin", ("epoch", 0), ("b", 0), ("e", 0, True), ("b", 1), ("e", 1, True),
                   ("train_end", ["accuracy", "loss"])]


def test_on_train_batch_hooks_still_take_precedence():
    """A callback that overrides on_train_batch_end (Keras 2's name) is called once per batch, as
    before; the aliases then stay quiet unless it calls super()."""
    x, y = data()
    calls = []

    class New(callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            calls.append(batch)

        def on_batch_end(self, batch, logs=None):
            raise AssertionError("the alias must not run when on_train_batch_end is overridden")

    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=8, verbose=0, callbacks=[New()])
    assert calls == [0, 1, 2, 3]


# ------------------------------------------------------------------ GPU: the same frozen ranges
_REASON = _core.cuda_unavailable_reason()


@pytest.mark.gpu
@pytest.mark.skipif(bool(_REASON), reason=f"no usable GPU: {_REASON}")
@pytest.mark.parametrize("optimizer", ["adam", "sgd"])
def test_frozen_layers_on_the_gpu(optimizer, tf32_off):
    x, y = data()
    results = {}
    for device in ("cpu", "gpu"):
        m = small_model(seed=9)
        m.layers[0].trainable = False
        m.layers[6].trainable = False  # the last Dense
        m.compile(optimizers.Adam(0.01) if optimizer == "adam" else optimizers.SGD(0.05, momentum=0.9),
                  "sparse_categorical_crossentropy", device=device)
        before = m.core.parameter_buffer().copy()
        m.fit(x, y, batch_size=8, epochs=1, shuffle=False, verbose=0)
        results[device] = (before, m.core.parameter_buffer(), list(m.core.optimizer_state().values()))
    ranges = param_ranges(small_model(seed=9))
    for device, (before, after, state) in results.items():
        for name in ("conv2d", "dense_1"):
            b, e = ranges[name]
            np.testing.assert_array_equal(after[b:e], before[b:e], err_msg=f"{device} {name}")
            assert not any(s[b:e].any() for s in state), f"{device} {name}"
    np.testing.assert_allclose(results["gpu"][1], results["cpu"][1], rtol=2e-3, atol=2e-4)
