"""One call per step: Model.train_step/test_step/predict_step(batch, next) run a step on `batch` (or,
with None, on the batch the previous call staged) and stage `next`. The bookkeeping (which staging
slot, when a staged batch is used or dropped, errors kept for their batch's turn) runs on the CPU
exactly as on a GPU, so it is tested here. Results with and without staging the next batch must be
bitwise identical, and so must a uint8 batch decoded by the model and the float batch it decodes to."""
import threading

import numpy as np
import pytest

import hpcnn
import hpcnn.training
from hpcnn import _core
from tests.support.small_models import small_model


# The core-level tests also run on a GPU when one is usable (there the copies really are async and
# the slots really matter); two runs of the same kernels on the same data are bitwise identical.
_GPU_REASON = _core.cuda_unavailable_reason()
DEVICES = ["cpu", pytest.param("gpu:0", marks=[pytest.mark.gpu, pytest.mark.skipif(
    bool(_GPU_REASON), reason=f"no usable GPU: {_GPU_REASON}")])]


def data(n=70, classes=3, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.random((n, 8, 8, 2), dtype=np.float32)
    y = x[:, :classes, :, 0].mean(axis=2).argmax(axis=1).astype(np.int32)
    return x, y


def fit_both(monkeypatch, make_data, loss, device="cpu", **fit_kw):
    """(weights, history) of two identical models fitted with and without staging the next batch."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(hpcnn.training.staging, "STAGE_NEXT", on)
        m = small_model()
        m.compile("adam", loss, ["accuracy"], device=device)
        h = m.fit(*make_data(), verbose=0, **fit_kw)
        assert not m.core.has_staged  # the last batch of the last epoch stages nothing
        out.append((m.get_weights(), h.history))
    return out


def assert_same(a, b):
    (wa, ha), (wb, hb) = a, b
    for x, y in zip(wa, wb):
        np.testing.assert_array_equal(x, y)
    for k in ("loss", "accuracy"):
        assert ha[k] == hb[k]


# ---------------------------------------------------------------------- fit, with and without
@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", "categorical_crossentropy"])
@pytest.mark.parametrize("u8", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_fit_arrays_identical_with_and_without_staging_next(monkeypatch, shuffle, loss, u8, device):
    def make():
        x, y = data(70)  # 70 = 4 batches of 16 + a partial batch of 6
        if u8:
            x = (x * 255).astype(np.uint8)
        if loss == "categorical_crossentropy":
            y = hpcnn.utils.to_categorical(y, 3)
        return x, y
    with_next, without = fit_both(monkeypatch, make, loss, device, batch_size=16, epochs=2, shuffle=shuffle,
                                  validation_data=make())
    assert_same(with_next, without)
    assert with_next[1]["val_loss"] == without[1]["val_loss"]


@pytest.mark.parametrize("one_hot", [None, 3])
@pytest.mark.parametrize("device", DEVICES)
def test_fit_hdf5_dataset_identical_with_and_without_staging_next(monkeypatch, tmp_path, one_hot, device):
    x, y = data(70)
    p = str(tmp_path / "d.h5")
    hpcnn.data.write_hdf5(p, {"x_train": (x * 255).astype(np.uint8), "y_train": y.astype(np.uint8)})
    loss = "categorical_crossentropy" if one_hot else "sparse_categorical_crossentropy"
    make = lambda: (hpcnn.data.HDF5Dataset(p, batch_size=16, one_hot=one_hot, seed=1),)
    with_next, without = fit_both(monkeypatch, make, loss, device, epochs=2)
    assert_same(with_next, without)


def test_fit_sequence_dataset_identical_and_on_epoch_end_called(monkeypatch):
    x, y = data(40)

    class Seq:
        def __init__(self):
            self.ends = 0

        def __len__(self):
            return 3

        def __getitem__(self, i):
            s = slice(i * 16, (i + 1) * 16)
            return x[s], y[s]

        def on_epoch_end(self):
            self.ends += 1

    seqs = []

    def make():
        seqs.append(Seq())
        return (seqs[-1],)
    with_next, without = fit_both(monkeypatch, make, "sparse_categorical_crossentropy", epochs=2)
    assert_same(with_next, without)
    assert [s.ends for s in seqs] == [2, 2]


@pytest.mark.parametrize("device", DEVICES)
def test_evaluate_and_predict_identical_with_and_without_staging_next(monkeypatch, device):
    x, y = data(70)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", ["accuracy"], device=device)
    m.fit(x, y, batch_size=16, epochs=1, verbose=0)
    out = []
    for on in (True, False):
        monkeypatch.setattr(hpcnn.training.staging, "STAGE_NEXT", on)
        out.append((m.evaluate(x, y, batch_size=16, verbose=0), m.predict(x, batch_size=16),
                    m.predict((x * 255).astype(np.uint8), batch_size=32)))
        assert not m.core.has_staged
    assert out[0][0] == out[1][0]
    np.testing.assert_array_equal(out[0][1], out[1][1])
    np.testing.assert_array_equal(out[0][2], out[1][2])


# ---------------------------------------------------------------------- the core's contract
def core_model(device="cpu", loss="sparse_categorical_crossentropy"):
    m = small_model()
    m.compile("adam", loss, device=device)
    return m.core


@pytest.mark.parametrize("device", DEVICES)
def test_core_staged_next_is_the_next_calls_batch(device):
    x, y = data(48)
    a, b = core_model(device), core_model(device)
    order = np.random.default_rng(5).permutation(48)
    batches = [(x, y, order[i:i + 16]) for i in range(0, 48, 16)] + [(x[:16], y[:16])]
    for k, batch in enumerate(batches):
        nxt = batches[k + 1] if k + 1 < len(batches) else None
        ra = a.train_step(batch if k == 0 else None, nxt)
        assert a.has_staged == (nxt is not None)
        assert ra == b.train_step(batch)
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


def test_core_without_a_staged_batch_none_is_an_error():
    x, y = data(32)
    m = core_model()
    with pytest.raises(ValueError, match="no batch is staged"):
        m.train_step(None)
    m.train_step((x[:16], y[:16]), (x[16:], y[16:]))
    m.train_step(None)
    with pytest.raises(ValueError, match="no batch is staged"):
        m.train_step(None)  # taken by the call before
    with pytest.raises(ValueError, match="no batch is staged"):
        m.test_step(None)
    with pytest.raises(ValueError, match="no batch is staged"):
        m.predict_step(None)
    with pytest.raises(ValueError, match="compiled"):
        small_model().core.train_step(None)
    with pytest.raises(ValueError, match="compiled"):
        small_model().core.train_step((x, y))


@pytest.mark.parametrize("device", DEVICES)
def test_core_a_staged_batch_is_dropped_by_an_explicit_batch_and_taken_by_any_step(device):
    x, y = data(48)
    a, b = core_model(device), core_model(device)
    # the next call passes its own batch: the staged one is dropped, never trained on
    a.train_step((x[:16], y[:16]), (x[16:32], y[16:32]))
    assert a.has_staged
    assert a.train_step((x[32:], y[32:])) == (b.train_step((x[:16], y[:16])), b.train_step((x[32:], y[32:])))[1]
    assert not a.has_staged
    # a batch staged by training is evaluated by test_step(None), predicted by predict_step(None)
    a.train_step((x[:16], y[:16]), (x[16:32], y[16:32]))
    b.train_step((x[:16], y[:16]))
    assert a.test_step(None, (x[:8], y[:8])) == b.test_step((x[16:32], y[16:32]))
    np.testing.assert_array_equal(a.predict_step(None), b.predict_step((x[:8],)))
    # predict_step stages without targets, ignores them when given, and checks nothing of them
    a.predict_step((x[:5],), (x[5:9], np.full(4, 99, np.int32)))
    np.testing.assert_array_equal(a.predict_step(None), b.predict_step((x[5:9],)))
    a.predict_step((x[:5],), (x[5:9],))
    with pytest.raises(ValueError, match="no targets"):
        a.train_step(None)
    assert not a.has_staged
    # drop_staged and a staged batch that another call drops: weights as without
    a.train_step((x[:16], y[:16]), (x[16:32], y[16:32]))
    a.drop_staged()
    assert not a.has_staged
    b.train_step((x[:16], y[:16]))
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


@pytest.mark.parametrize("device", DEVICES)
def test_core_staged_next_bigger_than_the_buffers_and_device_move(device):
    x, y = data(64)
    a, b = core_model(device), core_model(device)
    a.train_step((x[:8], y[:8]), (x[8:40], y[8:40]))  # staged while the buffers hold 8 rows
    b.train_step((x[:8], y[:8]))
    assert a.train_step(None, (x[40:64], y[40:64])) == b.train_step((x[8:40], y[8:40]))  # buffers grow
    a.to(device)  # same device: a no-op, the staged batch stays
    assert a.has_staged
    assert a.train_step(None) == b.train_step((x[40:64], y[40:64]))
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


BAD_BATCHES = [
    ("nan", lambda x, y: (np.where(np.arange(x.size).reshape(x.shape) == 3, np.nan, x).astype(np.float32), y)),
    ("label", lambda x, y: (x, np.where(np.arange(len(y)) == 2, 7, y).astype(np.int32))),
    ("shape", lambda x, y: (x[:, :4], y)),
    ("rows", lambda x, y: (x, y, np.array([0, 99]))),
    ("rows mismatch", lambda x, y: (x, y[:5])),
    ("decode", lambda x, y: ((x * 255).astype(np.uint8), y, None, ([1.0, 2.0, 3.0], [0.0]))),
    ("not numbers", lambda x, y: (np.array([["a"]] * len(x), dtype=object), y)),
]


@pytest.mark.parametrize("name,bad", BAD_BATCHES, ids=[b[0] for b in BAD_BATCHES])
@pytest.mark.parametrize("device", DEVICES)
def test_core_an_error_staging_next_is_raised_at_its_turn(device, name, bad):
    x, y = data(32)
    m, ref = core_model(device), core_model(device)
    args = bad(x, y)
    with pytest.raises(ValueError) as e_now:
        ref.train_step(args)  # the error of the batch given as this step's batch
    assert ref.staging_slots[1] == -1
    r1 = m.train_step((x[:16], y[:16]), args)  # staging it as the next batch raises nothing ...
    assert m.has_staged
    with pytest.raises(ValueError) as e_turn:
        m.train_step(None)  # ... its turn does, with the same message
    assert str(e_turn.value) == str(e_now.value)
    assert not m.has_staged
    # the model is still usable, and the failed batch changed nothing
    assert r1 == ref.train_step((x[:16], y[:16]))
    assert m.train_step((x, y)) == ref.train_step((x, y))
    np.testing.assert_array_equal(m.parameter_buffer(), ref.parameter_buffer())


def test_fit_reports_bad_staged_batches_with_their_numbers():
    x, y = data(48)
    x[20, 0, 0, 0] = np.nan  # batch 2 of 16
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"epoch 1, batch 2: input batch contains NaN"):
        m.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert m.core.step == 1
    x, y = data(48)
    y[40] = 9  # batch 3: array labels are all range-checked before the first step (issue 12 item 7)
    steps_before = m.core.step
    with pytest.raises(ValueError, match=r"^label 9 \(row 40\) is outside \[0, 3\)"):
        m.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert m.core.step == steps_before
    # A dataset's labels are prepared per batch: a bad one is reported with its batch's number,
    # after the batches before it trained.
    batches = [(x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]) for i in range(3)]
    with pytest.raises(ValueError, match=r"epoch 1, batch 3: label 9 \(row 8\)"):
        m.fit(batches_as_sequence(batches), shuffle=False, verbose=0)
    assert m.core.step == steps_before + 2


def batches_as_sequence(batches):
    class Seq:
        def __len__(self):
            return len(batches)

        def __getitem__(self, i):
            return batches[i]

    return Seq()


def test_fit_dataset_errors_keep_their_batch_numbers():
    x, y = data(48)

    class Seq:
        def __len__(self):
            return 3

        def __getitem__(self, i):
            if i == 2:
                return "not a tuple"
            return x[i * 16:(i + 1) * 16], (y if i == 0 else y.astype(np.float64) + 0.5)[i * 16:(i + 1) * 16]

    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    # batch 2's labels fail preparation: reported as batch 2, after batch 1 trained
    with pytest.raises(ValueError, match=r"epoch 1, batch 2: sparse_categorical_crossentropy needs whole"):
        m.fit(Seq(), epochs=1, verbose=0, shuffle=False)
    assert m.core.step == 1


def test_stop_training_and_steps_per_epoch_with_staging():
    x, y = data(64)

    class Stop(hpcnn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                self.model.stop_training = True

    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[Stop()])
    assert m.core.step == 2
    assert not m.core.has_staged  # batch 3 was staged, then dropped when fit stopped
    m.fit(x, y, batch_size=16, epochs=2, verbose=0, steps_per_epoch=3)
    assert m.core.step == 2 + 6
    assert not m.core.has_staged


class RecordingCore:
    """Stands in for the core model: records each train_step call as (its batch is the one the
    core staged at the last call, staged a next one)."""

    def __init__(self, core):
        self._c = core
        self.calls = []

    def train_step(self, batch, next=None):
        self.calls.append((self._c.has_staged and batch is self.last_next, next is not None))
        self.last_next = next
        return self._c.train_step(batch, next)

    last_next = None

    def __getattr__(self, name):
        return getattr(self._c, name)


@pytest.mark.parametrize("shuffle", [True, False])
def test_fit_makes_one_call_per_batch_each_staging_the_next(shuffle):
    x, y = data(70)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.core
    m._core = RecordingCore(m._core)
    m.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=shuffle)
    # 5 batches per epoch: the first of each epoch is passed, every other one was staged before
    assert m._core.calls == [(False, True), (True, True), (True, True), (True, True), (True, False)] * 2


def test_three_threads_dropping_staged_batches_do_not_deadlock():
    """Dropping a staged batch releases its NumPy arrays, which needs the GIL, while the call holds
    the model's lock: other threads must wait for that lock without holding the GIL."""
    x, y = data(64)
    m = core_model()
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(40):
                # fresh arrays in order: staged in place, kept alive only by the staged batch
                m.train_step((x, y, rng.permutation(64)[:16]), (x[:16].copy(), y[:16].copy()))
                m.get_weights()
                m.has_staged
        except Exception as e:  # pragma: no cover
            errors.append(e)
    ts = [threading.Thread(target=work, args=(s,), daemon=True) for s in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "deadlock"
    assert not errors


# ---------------------------------------------------------------------- staging slots
@pytest.mark.parametrize("device", DEVICES)
def test_staged_and_dropped_batches_alternate_slots_with_results_as_without(device):
    """Stage, drop (by an explicit batch), take: results as without, and the slot bookkeeping
    runs the same code as on a GPU."""
    x, y = data(64)
    a, b = core_model(device), core_model(device)
    for k in range(4):
        s = slice(16 * k, 16 * k + 16)
        a.test_step((x[:8], y[:8]), (x[s], y[s]))
        b.test_step((x[:8], y[:8]))
        assert a.train_step(None, (x[:8], y[:8])) == b.train_step((x[s], y[s]))
        assert a.test_step((x[8:16], y[8:16])) == b.test_step((x[8:16], y[8:16]))  # drops the staged one
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


@pytest.mark.parametrize("device", DEVICES)
def test_a_staged_batch_never_takes_the_last_steps_slot(device):
    """On a GPU the last step's backward may still read its input slot while the next batch is
    uploaded: the next batch must go to the other slot, also after dropped and failed ones, and a
    taken batch's slot becomes the last step's."""
    x, y = data(64)
    m = core_model(device)
    m.train_step((x[:16], y[:16]))
    last, staged = m.staging_slots
    assert staged == -1 and last in (0, 1)
    for k in range(6):
        s = slice(8 * k, 8 * k + 8)
        if k % 2:
            m.train_step(None, (x[s], y[s]))  # takes the staged batch: its slot is the last step's now
            last = 1 - last
        else:
            m.train_step((x[s], y[s]), (x[:8], y[:8]))  # drops any staged batch; explicit in the other slot
            last = 1 - last
        assert m.staging_slots == (last, 1 - last)
    # a bad batch given as this step's batch does not move the last step's slot
    with pytest.raises(ValueError):
        m.train_step((x[:8], np.full(8, 9, np.int32)))
    assert m.staging_slots == (last, -1)
    # a failed next batch is staged (as its error) in the other slot, and its turn moves nothing
    m.train_step((x[:8], y[:8]), (x[:8], np.full(8, 9, np.int32)))
    last = 1 - last
    assert m.staging_slots == (last, 1 - last)
    with pytest.raises(ValueError, match="label 9"):
        m.train_step(None)
    assert m.staging_slots == (last, -1)
    m.test_step((x[:8], y[:8]))
    m.predict_step((x[:8],))
    assert m.staging_slots[1] == -1


# ---------------------------------------------------------------------- uint8 inputs and their decode
def decoded(x8, scale, shift):
    """x8 * scale + shift per channel, rounded once to float32 (the fused multiply-add the decode
    uses): exact in float64 for these magnitudes, then one rounding."""
    c = x8.shape[-1]
    s = np.broadcast_to(np.asarray(scale, np.float32), (c,)).astype(np.float64)
    h = np.broadcast_to(np.asarray(shift, np.float32), (c,)).astype(np.float64)
    return (x8.astype(np.float64) * s + h).astype(np.float32)


def test_decode_u8_rounds_once():
    rng = np.random.default_rng(3)
    x8 = rng.integers(0, 256, (6, 5, 4, 3), dtype=np.uint8)
    scale, shift = [1 / 255 / 0.247, 1 / 255 / 0.243, 1 / 255 / 0.261], [-0.4914 / 0.247, -0.4822 / 0.243, -0.4465 / 0.261]
    np.testing.assert_array_equal(_core.ops.decode_u8(x8, scale, shift), decoded(x8, scale, shift))


@pytest.mark.parametrize("rows", [False, True])
@pytest.mark.parametrize("decode", [None, ([1 / 255], [0.0]), ([1 / 255, 2 / 255], [-0.5, 0.25])])
@pytest.mark.parametrize("device", DEVICES)
def test_core_uint8_batch_equals_the_float_batch_it_decodes_to(device, decode, rows):
    x, y = data(48)
    x8 = (x * 255).astype(np.uint8)
    xf = decoded(x8, *decode) if decode else x8.astype(np.float32)
    r = np.random.default_rng(1).permutation(48)[:20] if rows else None
    a, b = core_model(device), core_model(device)
    for _ in range(2):
        assert a.train_step((x8, y, r, decode)) == b.train_step((xf, y, r))
    assert a.test_step((x8, y, r, decode)) == b.test_step((xf, y, r))
    np.testing.assert_array_equal(a.predict_step((x8, None, r, decode)), b.predict_step((xf, None, r)))
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


def test_core_decode_is_checked():
    x, y = data(8)
    x8 = (x * 255).astype(np.uint8)
    m = core_model()
    with pytest.raises(ValueError, match=r"scale has 3 values; expected 1 or one per channel \(2\)"):
        m.train_step((x8, y, None, ([1.0, 2.0, 3.0], [0.0])))
    with pytest.raises(ValueError, match="shift nan"):
        m.train_step((x8, y, None, ([1.0], [float("nan")])))
    with pytest.raises(ValueError, match="applies to uint8 inputs only"):
        m.train_step((x, y, None, ([1.0], [0.0])))
    with pytest.raises(ValueError, match=r"\(scale, shift\)"):
        m.train_step((x8, y, None, [1.0]))


def test_hdf5_dataset_stored_u8_batches_train_as_the_decoded_ones(tmp_path):
    """What a GPU model gets from an HDF5Dataset (uint8 rows as stored, plus their decode) trains
    bit for bit as the float batches the loader decodes for the CPU."""
    x, y = data(70)
    p = str(tmp_path / "d.h5")
    hpcnn.data.write_hdf5(p, {"x_train": (x * 255).astype(np.uint8), "y_train": y.astype(np.uint8)})
    ds = hpcnn.data.HDF5Dataset(p, batch_size=16, seed=4, scale=((0.5, 0.4), (0.25, 0.3)))
    a, b = core_model(), core_model()
    stored = list(ds._live().epoch(0, 2, "cpu", True))
    dec = list(ds._live().epoch(0, 2, "cpu"))
    assert len(stored) == len(dec) == 5
    for (x8, y8, decode), (xf, yf) in zip(stored, dec):
        assert x8.dtype == np.uint8 and xf.dtype == np.float32 and x8.shape == xf.shape
        np.testing.assert_array_equal(y8, yf)
        np.testing.assert_array_equal(decoded(x8, *decode), xf)
        assert a.train_step((x8, y8, None, decode)) == b.train_step((xf, yf))
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())
    # float32 datasets come decoded either way (decode None)
    pf = str(tmp_path / "f.h5")
    hpcnn.data.write_hdf5(pf, {"x_train": x, "y_train": y.astype(np.uint8)})
    xb, _, decode = next(iter(hpcnn.data.HDF5Dataset(pf, batch_size=16)._live().epoch(0, 2, "cpu", True)))
    assert xb.dtype == np.float32 and decode is None
    # what fit uses: on the CPU decoded on the loader's threads; for a GPU as stored, with the decode
    xb, _, decode = next(iter(ds.model_batches(0, "cpu")))
    assert xb.dtype == np.float32 and decode is None
    xb, _, decode = next(iter(ds.model_batches(0, "gpu:0")))
    assert xb.dtype == np.uint8 and decode == ds._live().decode
    # batch buffers are pinned exactly when the target GPU is usable (pageable here without one)
    for target, pinned in (("cpu", False), ("gpu:0", not _GPU_REASON)):
        it = ds._live().epoch(0, 2, target, True)
        try:
            assert it.pinned == pinned
        finally:
            it.close()
    np.testing.assert_allclose(decode[0], [1 / 255 / 0.25, 1 / 255 / 0.3], rtol=1e-6)
    np.testing.assert_allclose(decode[1], [-0.5 / 0.25, -0.4 / 0.3], rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_core_uint8_with_many_distinct_channels(device):
    """More distinct per-channel values than the GPU kernel takes (64): decoded on the host, the
    same bits; one value for all of many channels: decoded on the GPU as one channel."""
    from hpcnn.layers import Dense, Flatten, InputLayer
    rng = np.random.default_rng(2)
    x8 = rng.integers(0, 256, (24, 3, 70), dtype=np.uint8)
    y = rng.integers(0, 3, 24).astype(np.int32)
    for decode in [(list(rng.uniform(0.001, 0.01, 70)), list(rng.uniform(-1, 1, 70))), ([0.02] * 70, [-0.5] * 70)]:
        a, b = [hpcnn.Sequential([InputLayer(input_shape=[3, 70]), Flatten(), Dense(3, activation="softmax")],
                                 seed=4) for _ in range(2)]
        for m in (a, b):
            m.compile("sgd", "sparse_categorical_crossentropy", device=device)
        assert a.core.train_step((x8, y, None, decode)) == b.core.train_step((decoded(x8, *decode), y))
        np.testing.assert_array_equal(a.core.predict_step((x8, None, None, decode)),
                                      b.core.predict_step((decoded(x8, *decode),)))


@pytest.mark.parametrize("threads", [1, 2])
def test_non_finite_input_reports_the_first_bad_value(threads):
    """The input scan runs in parallel blocks; the message names the first non-finite value
    wherever the others are (a later block's NaN scanned first must not win)."""
    x, y = data(2048)  # 2048 * 128 floats: many scan blocks
    flat = x.reshape(-1)
    flat[200_000] = np.inf
    flat[150_001] = np.nan
    flat[250_000] = np.nan
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    before = hpcnn.get_num_threads()
    hpcnn.set_num_threads(threads)
    try:
        with pytest.raises(ValueError, match=r"input batch contains NaN \(first at flat index 150001 of shape "
                                             r"\(2048, 8, 8, 2\)\)"):
            m.core.train_step((x, y))
        flat[150_001] = 1.0
        with pytest.raises(ValueError, match=r"contains inf \(first at flat index 200000 "):
            m.core.predict_step((x,))
        flat[[200_000, 250_000]] = 0.5
        assert m.core.predict_step((x,)).shape == (2048, 3)
    finally:
        hpcnn.set_num_threads(before)
