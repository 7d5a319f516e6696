"""Data parallelism on GPUs (NCCL, or the host/MPI transports through host memory) and the failure
paths of every transport: a replica that fails before its first gradient bucket, a stuck replica
(the timeout), the model after a failed step, ranks that share a GPU.

Each test runs on CPU replicas too where its logic allows ('cpu' parameter: runs everywhere, the
host and MPI transports), and on GPUs where they exist (`gpu`: one GPU; `multi_gpu`: two), skipped
with the reason otherwise. The failure paths run in a subprocess with a wall-clock limit: a hang
fails the test instead of stopping the suite. MPI tests need mpirun (as tests/core/distribute/test_distribute_mpi.py).
"""
import json
import os
import re
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from hpcnn import _core
from tests.support.dist_common import BATCH, make_arrays, make_model, rel_err
from tests.support.mpi_runs import checked, load_ranks, mpi_missing, mpirun
from tests.support import paths



def _gpus():
    try:
        return len(_core.cuda_devices())
    except Exception:  # noqa: BLE001 - no driver: no GPUs
        return 0


GPUS = _gpus()
NO_GPU = "" if GPUS >= 1 else f"no usable GPU: {_core.cuda_unavailable_reason() or 'none visible'}"
NO_TWO = "" if GPUS >= 2 else f"needs two usable GPUs ({GPUS} here{': ' + NO_GPU if NO_GPU else ''})"
NO_NCCL = "" if _core.distribute.nccl_compiled() else "this build has no NCCL (HPCNN_NCCL)"


NO_MPI = mpi_missing()

# The replicas of one process: CPU replicas (the host transport) run everywhere.
REPLICAS = [
    pytest.param(["cpu", "cpu"], id="cpu"),
    pytest.param(["gpu:0", "gpu:1"], id="two-gpus",
                 marks=[pytest.mark.gpu, pytest.mark.multi_gpu, pytest.mark.skipif(bool(NO_TWO), reason=NO_TWO),
                        pytest.mark.skipif(bool(NO_NCCL), reason=NO_NCCL)]),
]
# MPI ranks: two CPU ranks; two ranks on two GPUs (NCCL).
RANK_DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("gpu", id="two-gpus",
                 marks=[pytest.mark.gpu, pytest.mark.multi_gpu, pytest.mark.skipif(bool(NO_TWO), reason=NO_TWO),
                        pytest.mark.skipif(bool(NO_NCCL), reason=NO_NCCL)]),
]
ONE_GPU = [pytest.mark.gpu, pytest.mark.skipif(bool(NO_GPU), reason=NO_GPU)]
NEEDS_MPI = pytest.mark.skipif(bool(NO_MPI), reason=NO_MPI)


def weights(model):
    return np.concatenate([w.ravel() for w in model.get_weights()])


# ---------------------------------------------------------------- one process, several replicas
def run_isolated(body, timeout=120):
    """Runs `body` (Python, with `devices`, `hpcnn`, `_core`, the dist_common helpers and `emit`
    in scope) in a fresh process with a wall-clock limit; returns what it emitted (a dict)."""
    code = textwrap.dedent("""
        import json, sys, time
        import numpy as np
        import hpcnn
        from hpcnn import _core
        from hpcnn.distribute import CommunicationOptions, MirroredStrategy
        from tests.support.dist_common import BATCH, make_arrays, make_model
        _core.cuda_set_tf32(False) if _core.cuda_devices() else None
        out = {{}}
        def emit(**kw):
            out.update(kw)
        try:
        {body}
        finally:
            print("RESULT " + json.dumps(out), flush=True)
    """).format(body=textwrap.indent(textwrap.dedent(body), "    "))
    # The child imports the hpcnn this process imported (the same interpreter and environment) and,
    # started in the repository root, the tests package (`python -c` puts the current folder first).
    env = dict(os.environ, HPCNN_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                          cwd=paths.ROOT)
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("RESULT ")]
    assert lines, f"no result (exit {proc.returncode}):\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return json.loads(lines[-1][len("RESULT "):])


# One epoch with `inject` run after step 1 (a failure, a stall or an NCCL error for step 2), then the
# model trained again: what each failure-path test reports (run_isolated's emit).
FIT_WITH_FAILURE = """
    devices = {devices!r}
    s = MirroredStrategy(devices, communication_options=CommunicationOptions(timeout_seconds={timeout}))
    emit(implementation=s.implementation)
    with s.scope():
        model = make_model()
    x, y = make_arrays()
    def arm(batch, logs):
        if batch == 0:  # armed for step 2
            {inject}
    t0 = time.monotonic()
    try:
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0,
                  callbacks=[hpcnn.callbacks.LambdaCallback(on_train_batch_end=arm)])
        emit(raised=None)
    except Exception as err:  # noqa: BLE001
        emit(raised=type(err).__name__, message=str(err))
    emit(seconds=time.monotonic() - t0)
    try:  # the model after the failed step
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0)
        reps = [np.concatenate([w.ravel() for w in model.core.replica_weights(i)]) for i in range(len(devices))]
        emit(after="trained", replicas_agree=all(np.array_equal(reps[0], r) for r in reps))
    except Exception as err:  # noqa: BLE001
        emit(after=type(err).__name__, after_message=str(err))
"""


def fail_replica_1(stall):
    """Replica 1 fails (stall 0) or stalls `stall` seconds in step 2, before its first gradient bucket."""
    return f"_core.distribute.inject_failure(1, {stall})"


@pytest.mark.parametrize("devices", REPLICAS)
def test_replica_failing_before_its_first_bucket_stops_the_others(devices):
    """Replica 1 raises after the loss statistics and before its first gradient bucket (as a
    workspace that cannot grow would); replica 0 is then inside (or about to start) its bucket
    sums. fit must raise the real error at once (no hang, no timeout: 60 s here)."""
    r = run_isolated(FIT_WITH_FAILURE.format(devices=devices, timeout=60, inject=fail_replica_1(stall=0.0)),
                     timeout=150)
    assert r["raised"] == "RuntimeError", r
    assert "injected failure (a test) on replica 1 before its first gradient bucket" in r["message"]
    assert r["seconds"] < 30, r  # stopped by the failure, not by the 60 s timeout
    assert_model_after_failure(r)


def assert_model_after_failure(r):
    if r["implementation"] == "host" or r["after"] == "trained":
        # The host transport resets (and NCCL when no sum had been started): the model trains
        # on, every replica with the same weights.
        assert r["after"] == "trained" and r["replicas_agree"], r
    else:
        # An NCCL communicator that had to be aborted is gone: the next step says what to do.
        assert r["after"] == "RuntimeError" and "create a new MirroredStrategy" in r["after_message"], r


@pytest.mark.parametrize("devices", REPLICAS)
def test_a_stuck_replica_ends_the_step_at_the_timeout(devices):
    """Replica 1 sleeps 3 timeouts before its first bucket; with timeout_seconds=5 on CPUs, 15 on
    GPUs (NCCL's cold set-up must fit in it too) the others give up after one timeout (the step
    ends when replica 1 wakes and sees the failed group). Three timeouts leave two between the
    give-up and the wake (five made the test wait 25 s on CPUs for nothing more)."""
    limit = 5 if devices[0] == "cpu" else 15
    r = run_isolated(FIT_WITH_FAILURE.format(devices=devices, timeout=limit, inject=fail_replica_1(stall=3.0 * limit)),
                     timeout=300)
    assert r["raised"] == "RuntimeError", r
    assert re.search(rf"timed out after {limit} s|did not finish within {limit} s", r["message"]), r
    assert r["seconds"] < 12 * limit, r
    assert_model_after_failure(r)


@pytest.mark.parametrize("devices", REPLICAS)
def test_abort_from_outside_stops_a_waiting_replica(devices):
    """Group.abort (what a failing rank or a stop signal does) while a replica waits: its pending
    collective raises PeerFailure naming the cause, and the group reports failed."""
    body = f"""
    import threading
    devices = {devices!r}
    s = MirroredStrategy(devices, communication_options=CommunicationOptions(timeout_seconds=60))
    with s.scope():
        model = make_model()
    x, y = make_arrays()
    def arm(batch, logs):
        if batch == 0:
            _core.distribute.inject_failure(1, 8.0)  # replica 1 stuck: replica 0 waits for it
            threading.Timer(1.0, lambda: s.group.abort("stopped by the test")).start()
    t0 = time.monotonic()
    try:
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0,
                  callbacks=[hpcnn.callbacks.LambdaCallback(on_train_batch_end=arm)])
        emit(raised=None)
    except Exception as err:  # noqa: BLE001
        emit(raised=type(err).__name__, message=str(err))
    emit(seconds=time.monotonic() - t0, failed=bool(s.group.failed))
    """
    r = run_isolated(body, timeout=150)
    assert r["raised"] == "RuntimeError" and "stopped by the test" in r["message"], r
    assert r["seconds"] < 40, r


@pytest.mark.gpu
@pytest.mark.multi_gpu
@pytest.mark.skipif(bool(NO_NCCL), reason=NO_NCCL)
@pytest.mark.skipif(bool(NO_TWO), reason=NO_TWO)
def test_an_nccl_async_error_aborts_and_names_the_gpu():
    """Replica 1's communicator reports an asynchronous error (ncclSystemError, as after a network
    failure; injected) while it waits for step 2's gradient sum: it aborts, the step raises naming
    gpu:1 and the error, the other replica stops, and the strategy says to create a new one."""
    r = run_isolated(FIT_WITH_FAILURE.format(devices=["gpu:0", "gpu:1"], timeout=60,
                                             inject="_core.distribute.inject_nccl_async_error(1)"), timeout=150)
    assert r["implementation"] == "nccl"
    assert r["raised"] == "RuntimeError", r
    assert re.search(r"NCCL reported .* on gpu:1 \(rank 1\) during", r["message"]), r
    assert r["seconds"] < 30, r
    assert r["after"] == "RuntimeError" and "create a new MirroredStrategy" in r["after_message"], r


GPU_REPLICAS = [
    pytest.param(["gpu:0"], id="one-gpu", marks=ONE_GPU),
    pytest.param(["gpu:0", "gpu:1"], id="two-gpus",
                 marks=ONE_GPU + [pytest.mark.multi_gpu, pytest.mark.skipif(bool(NO_TWO), reason=NO_TWO)]),
]


@pytest.mark.parametrize("devices", GPU_REPLICAS)
def test_gpu_replicas_host_transport_equals_nccl_and_one_device(devices, tf32_off):
    """MirroredStrategy on GPUs through NCCL (one GPU: NCCL with one rank), and with
    implementation='host' (summed through host memory), against one GPU: the same numbers within
    the tolerance of the CPU tests. Buckets of 64 bytes: sums start after the first layer's
    backward, so the first step's workspace and scratch grow with sums in flight (the growth
    guard lets them finish first)."""
    from hpcnn.distribute import CommunicationOptions, MirroredStrategy
    x, y = make_arrays()
    ref = make_model()
    ref.compile("adam", "sparse_categorical_crossentropy", device="gpu:0")
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    results = {}
    for impl in (["nccl"] if not NO_NCCL else []) + ["host"]:
        s = MirroredStrategy(devices, communication_options=CommunicationOptions(implementation=impl,
                                                                                bytes_per_pack=64))
        assert s.implementation == impl
        with s.scope():
            model = make_model()
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
        results[impl] = weights(model)
        assert rel_err(results[impl], weights(ref)) <= 1e-5, impl
    if "nccl" in results:
        assert rel_err(results["nccl"], results["host"]) <= 1e-5


# ---------------------------------------------------------------- MPI ranks
def gpu_reference():
    x, y = make_arrays()
    ref = make_model()
    ref.compile("adam", "sparse_categorical_crossentropy", ["accuracy"], device="gpu:0")
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    ev = ref.evaluate(x, y, batch_size=BATCH, verbose=0)
    ref.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
    return ev, weights(ref)


def assert_evaluate_matches(got, ev):
    """evaluate's loss as the CPU tests require; its accuracy may differ by one row of the 80 (a
    near tie between two classes decided by a last bit on a GPU, tests/gpu/test_gpu_training_path.py)."""
    np.testing.assert_allclose(got[0], ev[0], rtol=1e-5)
    assert abs(float(got[1]) - float(ev[1])) <= 1.0 / len(make_arrays()[1]) + 1e-9


@NEEDS_MPI
@pytest.mark.gpu
@pytest.mark.multi_gpu
@pytest.mark.usefixtures("tf32_off")
def test_two_ranks_on_two_gpus_with_nccl_match_one_gpu(tmp_path):
    if NO_TWO or NO_NCCL:
        pytest.skip(NO_TWO or NO_NCCL)
    checked(mpirun("arrays", tmp_path, device="gpu"))
    r0, r1 = load_ranks(tmp_path, "arrays")
    assert str(r0["implementation"]) == "nccl"
    np.testing.assert_array_equal(r0["weights"], r1["weights"])
    ev, w = gpu_reference()
    assert_evaluate_matches(r0["evaluate"], ev)
    assert rel_err(r0["weights"], w) <= 1e-5


@NEEDS_MPI
@pytest.mark.usefixtures("tf32_off")
@pytest.mark.gpu
def test_two_ranks_on_one_gpu_sum_through_host_memory(tmp_path):
    """Two ranks on one GPU: NCCL refuses a shared device, so 'auto' takes MPI through host memory
    (rank 0 warns once, naming the ranks and the GPU), with one GPU's numbers."""
    if NO_GPU:
        pytest.skip(NO_GPU)
    proc = mpirun("arrays", tmp_path, device="gpu:0")
    checked(proc)
    r0, r1 = load_ranks(tmp_path, "arrays")
    assert str(r0["implementation"]) == str(r1["implementation"]) == "mpi"
    if not NO_NCCL:
        text = proc.stdout + proc.stderr
        assert re.search(r"ranks 0 and 1 on \S+ both use gpu:0.*NCCL cannot put two ranks on one GPU", text), text
    np.testing.assert_array_equal(r0["weights"], r1["weights"])
    ev, w = gpu_reference()
    assert_evaluate_matches(r0["evaluate"], ev)
    assert rel_err(r0["weights"], w) <= 1e-5


@NEEDS_MPI
@pytest.mark.gpu
def test_two_ranks_on_one_gpu_refused_with_nccl(tmp_path):
    if NO_GPU or NO_NCCL:
        pytest.skip(NO_GPU or NO_NCCL)
    proc = mpirun("refused", tmp_path, device="gpu:0", implementation="nccl")
    checked(proc)
    for r in range(2):  # every rank raises the same ValueError
        assert (tmp_path / f"refused_rank{r}.npz").exists()
        assert re.search(rf"rank {r}: ValueError: MultiWorkerMirroredStrategy cannot start:\s+ranks 0 and 1 on \S+ "
                         r"both use gpu:0.*implementation='nccl' cannot put two ranks on one GPU.*Start one rank per "
                         "GPU", proc.stdout, re.S), proc.stdout


@NEEDS_MPI
@pytest.mark.parametrize("device", RANK_DEVICES)
def test_a_rank_failing_before_its_first_bucket_stops_the_other(tmp_path, device):
    """Rank 1 raises after step 2's loss statistics, before its first bucket; rank 0 is in its
    bucket sums (NCCL: a kernel waiting on the GPU). Rank 0 must stop with an error naming rank 1,
    by the failure notice, long before the 120 s timeout (the subprocess limit is what a hang hits)."""
    proc = mpirun("fail_first_bucket", tmp_path, device=device, timeout=100)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "injected failure (a test) on replica 1 before its first gradient bucket" in text
    assert re.search(r"rank 1 \(host [^)]*\) failed: .*injected failure", text), text[-4000:]
    assert "no answer" not in text and "did not finish within" not in text  # not the timeout


@NEEDS_MPI
@pytest.mark.gpu
@pytest.mark.multi_gpu
def test_an_nccl_async_error_on_one_rank_stops_both(tmp_path):
    """Rank 1's NCCL reports an asynchronous error (injected) during step 2's sum: rank 1 aborts
    its communicator and tells rank 0, which stops naming it (not at the 120 s timeout)."""
    if NO_TWO or NO_NCCL:
        pytest.skip(NO_TWO or NO_NCCL)
    proc = mpirun("nccl_async_error", tmp_path, device="gpu", timeout=100)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert re.search(r"NCCL reported .* on gpu:1 \(rank 1\) during", text), text[-4000:]
    assert "did not finish within" not in text


@NEEDS_MPI
@pytest.mark.gpu
@pytest.mark.multi_gpu
def test_a_rank_failing_in_the_nccl_setup_stops_the_other(tmp_path):
    """Rank 1 fails after the unique id arrived and before its communicator exists (as a rank that
    dies there); rank 0 is waiting for NCCL's initialisation, which can never finish: its failure
    notice must end rank 0's wait (ncclCommAbort), not the 120 s timeout nor a hang."""
    if NO_TWO or NO_NCCL:
        pytest.skip(NO_TWO or NO_NCCL)
    proc = mpirun("nccl_setup_failure", tmp_path, device="gpu", timeout=100)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert "injected failure (a test) in the NCCL setup of rank 1" in text
    assert re.search(r"rank 1 \(host [^)]*\) failed: .*injected failure .*waited for the NCCL communicators' "
                     "initialisation", text, re.S), text[-4000:]
    assert "did not finish within" not in text


@NEEDS_MPI
@pytest.mark.parametrize("device", RANK_DEVICES)
def test_a_stuck_rank_ends_the_others_at_the_timeout(tmp_path, device):
    """Rank 1 sleeps 30 s before its first bucket; with HPCNN_DIST_TIMEOUT=6 (NCCL's setup must fit
    in it too) rank 0 gives up after about 6 s, naming the wait and the setting, and the job ends
    (MPI_Abort) instead of hanging."""
    proc = mpirun("stall_first_bucket", tmp_path, device=device, timeout=100, dist_timeout=6)
    assert proc.returncode != 0
    text = proc.stdout + proc.stderr
    assert re.search(r"within 6(\.0)? s", text), text[-4000:]
    assert "HPCNN_DIST_TIMEOUT" in text
