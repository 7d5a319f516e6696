"""Model.prefetch and fit's one-batch lookahead: the bookkeeping (which staging slot, when a
prefetched batch is used or discarded, errors) runs on the CPU exactly as on a GPU, so it is tested
here. Results with and without prefetch must be bitwise identical."""
import numpy as np
import pytest

import hpcnn
import hpcnn.training
from hpcnn import _core
from small_models import small_model


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
    """(weights, history) of two identical models fitted with and without prefetch."""
    out = []
    for on in (True, False):
        monkeypatch.setattr(hpcnn.training, "PREFETCH", on)
        m = small_model()
        m.compile("adam", loss, ["accuracy"], device=device)
        h = m.fit(*make_data(), verbose=0, **fit_kw)
        assert not m._model().has_prefetch  # the last batch of the last epoch is never prefetched
        out.append((m.get_weights(), h.history))
    return out


def assert_same(a, b):
    (wa, ha), (wb, hb) = a, b
    for x, y in zip(wa, wb):
        np.testing.assert_array_equal(x, y)
    for k in ("loss", "accuracy"):
        assert ha[k] == hb[k]


@pytest.mark.parametrize("shuffle", [True, False])
@pytest.mark.parametrize("loss", ["sparse_categorical_crossentropy", "categorical_crossentropy"])
@pytest.mark.parametrize("u8", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_fit_arrays_identical_with_and_without_prefetch(monkeypatch, shuffle, loss, u8, device):
    def make():
        x, y = data(70)  # 70 = 4 batches of 16 + a partial batch of 6
        if u8:
            x = (x * 255).astype(np.uint8)
        if loss == "categorical_crossentropy":
            y = hpcnn.utils.to_categorical(y, 3)
        return x, y
    with_pf, without = fit_both(monkeypatch, make, loss, device, batch_size=16, epochs=2, shuffle=shuffle)
    assert_same(with_pf, without)


@pytest.mark.parametrize("one_hot", [None, 3])
@pytest.mark.parametrize("device", DEVICES)
def test_fit_hdf5_dataset_identical_with_and_without_prefetch(monkeypatch, tmp_path, one_hot, device):
    x, y = data(70)
    p = str(tmp_path / "d.h5")
    hpcnn.data.write_hdf5(p, {"x_train": (x * 255).astype(np.uint8), "y_train": y.astype(np.uint8)})
    loss = "categorical_crossentropy" if one_hot else "sparse_categorical_crossentropy"
    make = lambda: (hpcnn.data.HDF5Dataset(p, batch_size=16, one_hot=one_hot, seed=1),)
    with_pf, without = fit_both(monkeypatch, make, loss, device, epochs=2)
    assert_same(with_pf, without)


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
    with_pf, without = fit_both(monkeypatch, make, "sparse_categorical_crossentropy", epochs=2)
    assert_same(with_pf, without)
    assert [s.ends for s in seqs] == [2, 2]


def core_model(device="cpu"):
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy", device=device)
    return m._model()


@pytest.mark.parametrize("device", DEVICES)
def test_core_prefetch_used_when_the_call_matches(device):
    x, y = data(48)
    a, b = core_model(device), core_model(device)
    order = np.random.default_rng(5).permutation(48)
    batches = [(x, y, order[i:i + 16]) for i in range(0, 48, 16)] + [(x[:16], y[:16], None)]
    for k, batch in enumerate(batches):
        ra = a.train_batch(*batch)
        assert not a.has_prefetch
        if k + 1 < len(batches):
            a.prefetch(*batches[k + 1])
            assert a.has_prefetch
        assert ra == b.train_batch(*batch)
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


@pytest.mark.parametrize("device", DEVICES)
def test_core_prefetch_that_does_not_match_is_discarded(device):
    x, y = data(48)
    x2 = x.copy()
    a, b = core_model(device), core_model(device)
    rows = np.arange(16)
    mismatches = [
        ((x, y, rows), (x, y, rows[::-1].copy())),     # same arrays, other rows
        ((x, y, rows), (x, y, None)),                  # rows vs none
        ((x[:16], y[:16], None), (x2[:16], y[:16], None)),  # same contents, another array
        ((x[:16], y[:16], None), (x[16:32], y[16:32], None)),
        ((x[:16], y[:16], None), (x[:8], y[:8], None)),  # another shape at the same address
    ]
    for pre, call in mismatches:
        a.prefetch(*pre)
        assert a.has_prefetch
        ra = a.train_batch(*call)
        assert not a.has_prefetch
        assert ra == b.train_batch(*call)
    # predict and evaluation in between also drop it
    a.prefetch(x, y, rows)
    np.testing.assert_array_equal(a.predict_batch(x[:5]), b.predict_batch(x[:5]))
    assert not a.has_prefetch
    a.prefetch(x[:16], y[:16])
    assert a.test_batch(x[16:32], y[16:32]) == b.test_batch(x[16:32], y[16:32])
    assert a.test_batch(x[:16], y[:16]) == b.test_batch(x[:16], y[:16])
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


@pytest.mark.parametrize("device", DEVICES)
def test_core_prefetch_then_bigger_batch_and_device_move(device):
    x, y = data(64)
    a, b = core_model(device), core_model(device)
    a.train_batch(x[:8], y[:8]), b.train_batch(x[:8], y[:8])
    a.prefetch(x[8:16], y[8:16])
    assert a.train_batch(x[:32], y[:32]) == b.train_batch(x[:32], y[:32])  # buffers grow: discarded
    a.prefetch(x[32:64], y[32:64])
    a.to(device)  # same device: a no-op, the prefetch stays
    assert a.train_batch(x[32:64], y[32:64]) == b.train_batch(x[32:64], y[32:64])
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


@pytest.mark.parametrize("device", DEVICES)
def test_core_prefetch_bad_input_raises_the_train_batch_error(device):
    x, y = data(32)
    m = core_model(device)
    bad_x = x.copy()
    bad_x[3, 0, 0, 0] = np.nan
    bad_y = y.copy()
    bad_y[2] = 7
    for args in [(bad_x, y), (x, bad_y), (x[:, :4], y), (x, y, np.array([0, 99]))]:
        with pytest.raises(ValueError) as e_pre:
            m.prefetch(*args)
        assert not m.has_prefetch
        with pytest.raises(ValueError) as e_step:
            m.train_batch(*args)
        assert str(e_pre.value) == str(e_step.value)
    m.train_batch(x, y)  # still usable
    with pytest.raises(ValueError, match="compiled"):
        small_model()._model().prefetch(x, y)


def test_fit_reports_bad_prefetched_batches_with_their_numbers():
    x, y = data(48)
    x[20, 0, 0, 0] = np.nan  # batch 2 of 16
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    with pytest.raises(ValueError, match=r"epoch 1, batch 2: input batch contains NaN"):
        m.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    x, y = data(48)
    y[40] = 9  # batch 3: array labels are all range-checked before the first step (issue 12 item 7)
    steps_before = m._model().step
    with pytest.raises(ValueError, match=r"^label 9 \(row 40\) is outside \[0, 3\)"):
        m.fit(x, y, batch_size=16, shuffle=False, verbose=0)
    assert m._model().step == steps_before
    # A dataset's labels are prepared per batch: a bad one is reported with its batch's number.
    batches = [(x[i * 16:(i + 1) * 16], y[i * 16:(i + 1) * 16]) for i in range(3)]
    with pytest.raises(ValueError, match=r"epoch 1, batch 3: label 9 \(row 8\)"):
        m.fit(batches_as_sequence(batches), shuffle=False, verbose=0)


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
    assert m._model().step == 1


def test_stop_training_and_steps_per_epoch_with_lookahead():
    x, y = data(64)

    class Stop(hpcnn.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if batch == 1:
                self.model.stop_training = True

    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m.fit(x, y, batch_size=16, epochs=3, verbose=0, callbacks=[Stop()])
    assert m._model().step == 2
    m.fit(x, y, batch_size=16, epochs=2, verbose=0, steps_per_epoch=3)
    assert m._model().step == 2 + 6


class CountingCore:
    """Stands in for the core model: records whether each train_batch found a prefetched batch and
    used it (has_prefetch before, not after)."""

    def __init__(self, core):
        self._c = core
        self.used = []

    def train_batch(self, *a):
        before = self._c.has_prefetch
        r = self._c.train_batch(*a)
        self.used.append(before and not self._c.has_prefetch)
        return r

    def __getattr__(self, name):
        return getattr(self._c, name)


@pytest.mark.parametrize("shuffle", [True, False])
def test_fit_uses_every_prefetch(shuffle):
    x, y = data(70)
    m = small_model()
    m.compile("adam", "sparse_categorical_crossentropy")
    m._model()
    m._core = CountingCore(m._core)
    m.fit(x, y, batch_size=16, epochs=2, verbose=0, shuffle=shuffle)
    # 5 batches per epoch: the first of each epoch is staged by train_batch itself
    assert m._core.used == [False, True, True, True, True] * 2


def test_two_threads_dropping_prefetches_do_not_deadlock():
    """A dropped prefetch releases its NumPy arrays, which needs the GIL, while the call holds the
    model's lock: other threads must wait for that lock without holding the GIL."""
    import threading
    x, y = data(64)
    m = core_model()
    errors = []

    def work(seed):
        try:
            rng = np.random.default_rng(seed)
            for _ in range(40):
                a = rng.permutation(64)[:16]
                m.prefetch(x.copy(), y.copy(), a)  # fresh arrays: kept alive only by the prefetch
                m.train_batch(x, y, rng.permutation(64)[:16])
                m.get_weights()
        except Exception as e:  # pragma: no cover
            errors.append(e)
    ts = [threading.Thread(target=work, args=(s,), daemon=True) for s in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=60)
    assert not any(t.is_alive() for t in ts), "deadlock"
    assert not errors


@pytest.mark.parametrize("device", DEVICES)
def test_repeated_prefetches_and_consumption_alternate_slots(device):
    """Prefetch, drop (by prefetching again), use: results as without, and the slot bookkeeping
    (a dropped prefetch must not move the 'last step' slot) runs the same code as on a GPU."""
    x, y = data(64)
    a, b = core_model(device), core_model(device)
    for k in range(4):
        s = slice(16 * k, 16 * k + 16)
        a.prefetch(x[:8], y[:8])
        a.prefetch(x[s], y[s])
        assert a.train_batch(x[s], y[s]) == b.train_batch(x[s], y[s])
        assert a.test_batch(x[:8], y[:8]) == b.test_batch(x[:8], y[:8])
    np.testing.assert_array_equal(a.parameter_buffer(), b.parameter_buffer())


@pytest.mark.parametrize("device", DEVICES)
def test_a_prefetch_never_takes_the_last_steps_slot(device):
    """On a GPU the last step's backward may still read its input slot when the prefetch copies
    the next batch: the prefetch must use the other slot, also after dropped prefetches, and a
    used prefetch's slot becomes the last step's."""
    x, y = data(64)
    m = core_model(device)
    m.train_batch(x[:16], y[:16])
    last, pending = m.staging_slots
    assert pending == -1
    for k in range(6):
        s = slice(8 * k, 8 * k + 8)
        m.prefetch(x[s], y[s])
        assert m.staging_slots == (last, 1 - last)
        m.prefetch(x[:8], y[:8])  # drops the first: still the other slot
        assert m.staging_slots == (last, 1 - last)
        if k % 2:
            m.train_batch(x[:8], y[:8])  # uses it
            assert m.staging_slots == (1 - last, -1)
        else:
            m.train_batch(x[s], y[s])  # mismatch: dropped, staged synchronously in the other slot
            assert m.staging_slots == (1 - last, -1)
        last = 1 - last
    m.test_batch(x[:8], y[:8])
    m.predict_batch(x[:8])
    assert m.staging_slots[1] == -1
