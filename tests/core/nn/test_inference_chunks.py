"""Inference in chunks of rows (issue 27; nn/model.cpp, Model::forward): on the CPU, evaluate and
predict run a batch through all the layers a chunk of rows at a time, so that a chunk's activations
pass from layer to layer in the caches. What is checked:
- the chunk size the rule picks: ResNet-20's 64 KiB activations give 8 rows a thread, side by side
  (one chunk per thread) where the batch has a chunk for every thread after the first, else one
  chunk of 8 rows a thread at a time; never more than the batch, at least 2 rows; where the
  weights (read again by every chunk) are large beside a chunk's activations only the leading
  layers take chunks (the split: the tutorial CNN's first two convolutions and poolings, a
  convolution before a heavy Dense), none where no such prefix holds half of the activations; an
  override and its bad values;
- a chunked prefix with a whole-batch tail (a folded BN, a residual block, and an early activation
  and a view of it read across the split) predicts and evaluates what the whole batch does;
- the answers do not depend on the chunking: predict and evaluate with chunks of 3 rows (the last
  one short), of 2, of 1 row, and in one piece agree to float32 rounding, on a model with every kind
  of inference fusion (folded BN, residual blocks) and a Dense head, with sample weights, on 1, 2
  and 3 threads (chunks side by side, with chunks left over for one thread at a time);
- a model under a distribution strategy takes the override into every replica (the same answers);
- training never chunks (its batch normalization needs the whole batch): the same loss with any
  override;
- a step's later chunks reuse the folded conv+BN kernel of its first chunk, never one of an earlier
  step (after fit or set_weights the chunked answers are the whole batch's)."""
import numpy as np
import pytest

import hpcnn
from hpcnn import applications, optimizers
from hpcnn.distribute import MirroredStrategy
from hpcnn.layers import (Add, BatchNormalization, Conv2D, Dense, Dropout, Flatten, GlobalAveragePooling2D,
                          Input, MaxPooling2D, ReLU)


def block_net(seed: int = 3) -> hpcnn.Model:
    inp = Input((8, 8, 8))
    x = ReLU()(BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(inp)))
    y = ReLU()(BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(x)))
    x = ReLU()(Add()([BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(y)), x]))
    x = MaxPooling2D(2)(x)
    pooled = GlobalAveragePooling2D()(x)
    flat = Dense(8, activation="relu")(Flatten()(x))
    out = Dense(4, activation="softmax")(Dropout(0.5)(Add()([pooled, Dense(16)(flat)])))
    return hpcnn.Model(inp, out, seed=seed)


def data(n: int, seed: int = 7):
    r = np.random.default_rng(seed)
    return (r.standard_normal((n, 8, 8, 8)) + 0.2).astype(np.float32), (np.arange(n) % 4).astype(np.int32)


def trained(seed: int = 3) -> hpcnn.Model:
    m = block_net(seed)
    m.compile(optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy", metrics=["accuracy"])
    x, y = data(16)
    m.fit(x, y, batch_size=16, epochs=3, verbose=0)  # moving statistics away from 0 and 1
    return m


def test_the_rule_picks_rows_whose_activations_fit_the_caches():
    m = applications.resnet20_cifar(seed=0)
    before = hpcnn.get_num_threads()
    try:
        hpcnn.set_num_threads(2)
        # the largest activation: 32x32x16 floats = 64 KiB a row; 512 KiB a thread: 8 rows
        assert m.core.inference_chunk_rows(128) == 8
        assert m.core.inference_chunks_side_by_side(128)
        assert m.core.inference_chunk_rows(24) == 8  # the first chunk, then one for each thread
        assert m.core.inference_chunks_side_by_side(24)
        assert m.core.inference_chunk_rows(23) == 16  # too few rows: one chunk at a time, ops over both
        assert not m.core.inference_chunks_side_by_side(23)
        assert m.core.inference_chunk_rows(10) == 10  # never more than the batch
        assert not m.core.inference_chunks_side_by_side(10)
        hpcnn.set_num_threads(1)
        assert m.core.inference_chunk_rows(128) == 8
        assert not m.core.inference_chunks_side_by_side(128)  # one thread: one after another
        wide = hpcnn.Sequential([Input((32, 32, 96)), Conv2D(96, 3, padding="same"), GlobalAveragePooling2D()])
        assert wide.core.inference_chunk_rows(128) == 2  # 384 KiB a row: the floor of 2 rows
        hpcnn.set_num_threads(4)
        assert wide.core.inference_chunk_rows(128) == 2
        assert wide.core.inference_chunk_rows(9) == 8  # not 5 chunks for 4 threads: 2 rows a thread at a time
        # 16 MiB a row (ResNet50's stem at 224x224 is 3 MiB): no chunk stays in the caches, the
        # whole batch at once, ops over the threads
        big = hpcnn.Sequential([Input((256, 256, 64)), Conv2D(64, 3, padding="same"), GlobalAveragePooling2D()])
        assert big.core.inference_chunk_rows(128) == 128
        assert not big.core.inference_chunks_side_by_side(128)
    finally:
        hpcnn.set_num_threads(before)
    threads = hpcnn.get_num_threads()
    # every chunk reads the weights of its layers again: a large Dense kernel takes the whole batch,
    # the convolution before it chunks (the split: nodes [0, split) in chunks)
    heavy = hpcnn.Sequential([Input((32, 32, 3)), Conv2D(32, 3, padding="same"), Flatten(), Dense(512)])
    assert heavy.core.inference_chunks_split(250) == 2  # Conv2D and Flatten; Dense whole
    # ResNet-20: every node (a batch of 1 never chunks, and its split is every node)
    assert m.core.inference_chunks_split(128) == m.core.inference_chunks_split(1) > 70
    tutorial = applications.tutorial_cnn(seed=0)
    before = hpcnn.get_num_threads()
    try:
        hpcnn.set_num_threads(2)
        # 128 KiB a row (32x32x32): 4 rows a thread; the first two convolutions and poolings (60 of
        # the 75 thousand activations a row) in chunks, conv3, conv4 and the dense head whole
        assert tutorial.core.inference_chunk_rows(250) == 4 and tutorial.core.inference_chunks_split(250) == 4
        assert tutorial.core.inference_chunks_side_by_side(250)
    finally:
        hpcnn.set_num_threads(before)
    # no prefix with half of the activations passes: the whole batch
    dense_only = hpcnn.Sequential([Input((64,)), Dense(4096), Dense(4096), Dense(10)])
    assert dense_only.core.inference_chunk_rows(250) == 250
    m.core.set_inference_chunk_rows(5)
    assert m.core.inference_chunk_rows(128) == 5
    assert m.core.inference_chunk_rows(3) == 3
    m.core.set_inference_chunk_rows(0)  # the rule again: 8 rows a thread here
    assert m.core.inference_chunk_rows(128) == 8
    assert m.core.inference_chunk_rows(8 * threads + 7) == min(8 * threads + 7, 8 * threads)
    with pytest.raises(ValueError, match="inference chunk rows must be >= 0"):
        m.core.set_inference_chunk_rows(-1)


@pytest.mark.parametrize("threads", [1, 2, 3])
def test_predict_and_evaluate_do_not_depend_on_the_chunks(threads):
    m = trained()
    x, y = data(20, seed=8)
    w = np.linspace(0.5, 2.0, 20).astype(np.float32)
    answers = {}
    before = hpcnn.get_num_threads()
    try:
        hpcnn.set_num_threads(threads)
        # one piece; chunks of 3 (the last of 2 rows); of 2; single rows. On 2 threads, chunks of 3:
        # the first alone, then 5 side by side (each thread taking the next), then the 2 rows alone.
        for rows in (1000, 3, 2, 1):
            m.core.set_inference_chunk_rows(rows)
            assert m.core.inference_chunk_rows(20) == min(rows, 20)
            assert m.core.inference_chunks_side_by_side(20) == (threads > 1 and rows < 20)
            # twice: the second call runs on the side arena and the folded kernels the first left
            for _ in range(2):
                answers[rows] = (m.predict(x, batch_size=20, verbose=0),
                                 m.evaluate(x, y, batch_size=20, verbose=0, sample_weight=w))
    finally:
        hpcnn.set_num_threads(before)
    want_p, want_e = answers[1000]
    assert want_p.shape == (20, 4)
    assert np.all(np.isfinite(want_p))
    for rows in (3, 2, 1):
        got_p, got_e = answers[rows]
        np.testing.assert_allclose(got_p, want_p, rtol=1e-5, atol=1e-6, err_msg=f"chunks of {rows}")
        assert got_e == pytest.approx(want_e, rel=1e-5), f"chunks of {rows}"
    # each row alone (a batch of one never chunks) gives the same rows
    m.core.set_inference_chunk_rows(0)
    alone = np.concatenate([m.predict(x[i:i + 1], verbose=0) for i in range(20)])
    np.testing.assert_allclose(alone, want_p, rtol=1e-5, atol=1e-6)


def test_resnet20_side_by_side_is_the_whole_batch():
    # The real case: 8-row chunks side by side on 2 threads, with folded BN, residual tails, the
    # deep convolutions that run apart from their BN at 8 rows (a per-thread buffer), and the
    # Winograd kernels the threads share under the cache's reader lock.
    m = applications.resnet20_cifar(seed=0)
    m.compile(optimizers.SGD(0.1, momentum=0.9), "sparse_categorical_crossentropy")
    r = np.random.default_rng(4)
    x = r.standard_normal((64, 32, 32, 3)).astype(np.float32)
    m.fit(x, np.arange(64) % 10, batch_size=32, epochs=1, verbose=0)  # moving statistics of its own
    before = hpcnn.get_num_threads()
    try:
        hpcnn.set_num_threads(2)
        assert m.core.inference_chunk_rows(64) == 8 and m.core.inference_chunks_side_by_side(64)
        chunked = [m.predict(x, batch_size=64, verbose=0) for _ in range(3)]
        m.core.set_inference_chunk_rows(1000)
        whole = m.predict(x, batch_size=64, verbose=0)
    finally:
        hpcnn.set_num_threads(before)
    for got in chunked:
        np.testing.assert_allclose(got, whole, rtol=1e-5, atol=1e-6)


def skip_net(seed: int = 5) -> hpcnn.Model:
    """Heavy deep layers (a wide Dense head) after light early ones: the early ones take chunks, the
    head the whole batch; an early activation (and a view of it) read again by the head, across
    the split; a folded BN and a residual block before it."""
    inp = Input((32, 32, 4))  # 64 KiB activations: 8 rows a chunk
    a = ReLU()(BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(inp)))
    b = ReLU()(Add()([BatchNormalization()(Conv2D(16, 3, padding="same", use_bias=False)(a)), a]))
    p = MaxPooling2D(4)(b)
    early = Flatten()(MaxPooling2D(8)(a))  # a view of a pooling of the first block's input
    head = Dense(512, activation="relu")(Flatten()(p))
    head = Dense(512, activation="relu")(head)
    out = Dense(4, activation="softmax")(Add()([Dense(64)(head), Dense(64)(early)]))
    return hpcnn.Model(inp, out, seed=seed)


@pytest.mark.parametrize("threads", [1, 2])
def test_a_chunked_prefix_and_a_whole_tail_are_the_whole_batch(threads):
    m = skip_net()
    m.compile(optimizers.SGD(0.05, momentum=0.9), "sparse_categorical_crossentropy", metrics=["accuracy"])
    r = np.random.default_rng(3)
    x = r.standard_normal((40, 32, 32, 4)).astype(np.float32)
    y = (np.arange(40) % 4).astype(np.int32)
    m.fit(x, y, batch_size=20, epochs=2, verbose=0)
    w = np.linspace(0.5, 2.0, 40).astype(np.float32)
    before = hpcnn.get_num_threads()
    try:
        hpcnn.set_num_threads(threads)
        split = m.core.inference_chunks_split(40)
        assert 0 < split < 20 and m.core.inference_chunk_rows(40) < 40  # a prefix in chunks, a whole tail
        got = [(m.predict(x, batch_size=40, verbose=0), m.evaluate(x, y, batch_size=40, verbose=0, sample_weight=w))
               for _ in range(2)]
        m.core.set_inference_chunk_rows(1000)
        want_p = m.predict(x, batch_size=40, verbose=0)
        want_e = m.evaluate(x, y, batch_size=40, verbose=0, sample_weight=w)
        m.core.set_inference_chunk_rows(0)
    finally:
        hpcnn.set_num_threads(before)
    for p, e in got:
        np.testing.assert_allclose(p, want_p, rtol=1e-5, atol=1e-6)
        assert e == pytest.approx(want_e, rel=1e-5)


def test_training_never_chunks():
    losses = []
    for rows in (0, 1):
        m = block_net()
        m.core.set_inference_chunk_rows(rows)
        m.compile(optimizers.SGD(0.05), "sparse_categorical_crossentropy")
        x, y = data(12)
        losses.append([m.train_on_batch(x, y) for _ in range(3)])
    assert losses[0] == losses[1]  # bit for bit: batch statistics over all 12 rows either way


def test_replicas_take_the_override():
    strategy = MirroredStrategy(["cpu", "cpu"])
    with strategy.scope():
        m = block_net()
        m.compile(optimizers.SGD(0.05), "sparse_categorical_crossentropy")
    x, _ = data(12)
    whole = m.predict(x, batch_size=12, verbose=0)
    m.core.set_inference_chunk_rows(1)
    np.testing.assert_allclose(m.predict(x, batch_size=12, verbose=0), whole, rtol=1e-5, atol=1e-6)


def test_later_chunks_reuse_the_fold_of_the_step_and_no_other():
    # The folded conv+BN kernel is made by a step's first chunk and reused by its later chunks; the
    # next step folds again, so new weights (set_weights, a training step) are never missed.
    m = trained()
    x, y = data(20, seed=9)
    m.core.set_inference_chunk_rows(4)
    first = m.predict(x, batch_size=20, verbose=0)
    m.fit(x, y, batch_size=20, epochs=1, verbose=0)  # new weights and moving statistics
    chunked = m.predict(x, batch_size=20, verbose=0)
    m.core.set_inference_chunk_rows(1000)
    whole = m.predict(x, batch_size=20, verbose=0)
    np.testing.assert_allclose(chunked, whole, rtol=1e-5, atol=1e-6)
    assert np.max(np.abs(chunked - first)) > 1e-4  # the step changed the answers
    weights = [w * 0.5 for w in m.get_weights()]
    m.set_weights(weights)
    m.core.set_inference_chunk_rows(4)
    chunked = m.predict(x, batch_size=20, verbose=0)
    m.core.set_inference_chunk_rows(1000)
    np.testing.assert_allclose(chunked, m.predict(x, batch_size=20, verbose=0), rtol=1e-5, atol=1e-6)
