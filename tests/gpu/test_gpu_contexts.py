"""Which GPUs a process touches. A CUDA context costs hundreds of MiB on its GPU, and where GPUs are
in exclusive-process mode (common on clusters) a second process's context on a GPU is an error. So:
listing devices creates no context; a MultiWorkerMirroredStrategy rank that asked for no device
takes local GPU ``local_rank % n`` and creates a context there only; the pinned-memory helpers
leave the calling thread's current GPU as it was.

The device choice is plain Python and is checked here; the context counts need a GPU (the CUDA
driver's own record, `_core.cuda_primary_context_active`) and run in a fresh interpreter each, so
that nothing an earlier test did is counted.
"""
import json
import os
import subprocess
import sys
import textwrap

import pytest

from hpcnn import _core
from hpcnn.distribute import LOCAL_RANK_VARIABLES, default_rank_device, local_rank
from tests.support.mpi_runs import mpi_missing

# A real GPU: the CPU cannot stand in for one here (HPCNN_TEST_GPU=cpu does not apply).
REASON = _core.cuda_unavailable_reason()
ON_GPU = [pytest.mark.gpu, pytest.mark.skipif(bool(REASON), reason=f"no usable GPU: {REASON}")]


def on_gpu(test):
    for mark in ON_GPU:
        test = mark(test)
    return test

WORLD = {"rank": 5, "size": 8, "local_rank": 1, "local_size": 4, "host": "node7"}


# ------------------------------------------------------------------ the device choice (no GPU needed)
def test_the_launchers_local_rank_wins_over_mpis():
    assert local_rank(WORLD, {}) == 1  # MPI's, ranks sharing memory
    assert local_rank(WORLD, {"OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == 3
    assert local_rank(WORLD, {"SLURM_LOCALID": "2", "OMPI_COMM_WORLD_LOCAL_RANK": "3"}) == 2  # srun first
    assert local_rank(WORLD, {"MPI_LOCALRANKID": "0"}) == 0
    assert local_rank(WORLD, {"SLURM_LOCALID": ""}) == 1  # set but empty: not a rank
    assert LOCAL_RANK_VARIABLES[0] == "SLURM_LOCALID"


@pytest.mark.parametrize("local, gpus, expected", [
    (0, 0, "cpu"), (3, 0, "cpu"),            # no GPU visible: a CPU rank
    (0, 4, "gpu:0"), (3, 4, "gpu:3"),        # one rank per GPU (srun --ntasks-per-node=4 --gres=gpu:4)
    (5, 4, "gpu:1"), (4, 4, "gpu:0"),        # more ranks than GPUs: r % n, shared (summed through MPI)
    (2, 1, "gpu:0"),                         # --gpus-per-task=1: every rank sees its own GPU as gpu:0
])
def test_a_rank_takes_local_gpu_local_rank_modulo_the_gpus_it_sees(local, gpus, expected):
    env = {"SLURM_LOCALID": str(local)}
    assert default_rank_device(WORLD, env, gpu_count=gpus) == expected


def test_listing_gpus_does_not_ask_for_free_memory_unless_told():
    # Without a GPU the list is empty; with one, the default listing leaves free_memory at 0
    # (asking would have created a context on every GPU).
    assert all(d.free_memory == 0 for d in _core.cuda_devices())


def test_gpu_memory_free_refuses_the_cpu():
    from hpcnn.devices import gpu_memory_free
    with pytest.raises(ValueError, match="not a GPU"):
        gpu_memory_free("cpu")


# ------------------------------------------------------------------ contexts, counted by the driver
def fresh_python(code, env=None, timeout=300):
    """Runs `code` in a fresh interpreter (no context made by earlier tests) and returns the JSON it
    prints last."""
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          timeout=timeout, env=dict(os.environ, **(env or {})))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


CONTEXTS = """
    def contexts():
        return [i for i in range(len(_core.cuda_devices())) if _core.cuda_primary_context_active(i)]
"""


@pytest.mark.parametrize("call", ["_core.cuda_devices()", "hpcnn.list_physical_devices()",
                                  "hpcnn.list_physical_devices('GPU')", "hpcnn.gpu_unavailable_reason()",
                                  "hpcnn.devices.normalize('gpu')"])
@on_gpu
def test_listing_and_naming_gpus_creates_no_context(call):
    got = fresh_python(f"""
        import json, hpcnn
        from hpcnn import _core
        {textwrap.dedent(CONTEXTS).strip()}
        before = contexts()
        {call}
        print(json.dumps({{"before": before, "after": contexts(), "thread": _core.cuda_current_context_device()}}))
    """)
    assert got == {"before": [], "after": [], "thread": -1}, call


@on_gpu
def test_free_memory_is_asked_only_where_told():
    got = fresh_python("""
        import json, hpcnn
        from hpcnn import _core
        n = len(_core.cuda_devices())
        listed = hpcnn.list_physical_devices('GPU')
        unasked = [d.details["memory_free"] for d in listed]
        free = hpcnn.devices.gpu_memory_free(f"gpu:{n - 1}")
        active = [i for i in range(n) if _core.cuda_primary_context_active(i)]
        again = [d.details["memory_free"] for d in hpcnn.list_physical_devices('GPU')]
        print(json.dumps({"n": n, "unasked": unasked, "free": free, "active": active, "again": again,
                          "thread": _core.cuda_current_context_device()}))
    """)
    n = got["n"]
    assert got["unasked"] == [None] * n
    assert got["free"] > 0
    assert got["active"] == [n - 1]       # the asked GPU only
    assert got["again"][n - 1] > 0        # a GPU in use reports its free memory
    assert got["again"][:n - 1] == [None] * (n - 1)
    assert got["thread"] == -1            # asked from a thread of its own: this one has no context


@on_gpu
def test_pinned_memory_leaves_the_calling_threads_gpu_as_it_was():
    got = fresh_python("""
        import json, threading
        from hpcnn import _core
        n = len(_core.cuda_devices())
        out = {}
        def fresh_thread():  # a thread that never chose a GPU (the prefetcher's)
            b = _core.cuda_hold_pinned_memory(1 << 20, 0)
            out["after_alloc"] = _core.cuda_current_context_device()
            b.release()
            out["after_free"] = _core.cuda_current_context_device()
        def busy_thread():   # a thread working on the last GPU
            m = _core.cuda_hold_memory(1 << 20, f"gpu:{n - 1}")
            out["busy_before"] = _core.cuda_current_context_device()
            b = _core.cuda_hold_pinned_memory(1 << 20, 0)
            b.release()
            out["busy_after"] = _core.cuda_current_context_device()
            m.release()
        for f in (fresh_thread, busy_thread):
            t = threading.Thread(target=f)
            t.start()
            t.join()
        out["n"] = n
        print(json.dumps(out))
    """)
    n = got["n"]
    assert (got["after_alloc"], got["after_free"]) == (-1, -1)
    assert (got["busy_before"], got["busy_after"]) == (n - 1, n - 1)


@on_gpu
def test_each_rank_of_a_multi_worker_strategy_makes_a_context_on_its_own_gpu_only(tmp_path):
    """Two ranks, no device named, no binding by the launcher (as slurm/multi-gpu.sbatch runs them):
    rank r trains on gpu:(r % n) and holds no context on any other GPU. On a one-GPU node both
    ranks share gpu:0 (summed through MPI in host memory)."""
    why = mpi_missing()
    if why:
        pytest.skip(why)
    script = tmp_path / "rank.py"
    script.write_text(textwrap.dedent("""
        import json, sys
        import hpcnn
        from hpcnn import _core
        n = len(_core.cuda_devices())
        strategy = hpcnn.distribute.MultiWorkerMirroredStrategy()
        active = [i for i in range(n) if _core.cuda_primary_context_active(i)]
        with open(sys.argv[1] + f"/rank{strategy.worker_index}.json", "w") as f:
            json.dump({"n": n, "devices": list(strategy.local_devices), "active": active,
                       "transport": strategy.group.transport}, f)
    """))
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               OMPI_MCA_btl="self,tcp", OMPI_MCA_btl_tcp_if_include="lo", OMPI_MCA_oob_tcp_if_include="lo",
               HPCNN_DIST_TIMEOUT="120")
    proc = subprocess.run(["mpirun", "-np", "2", "--oversubscribe", sys.executable, str(script), str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    for r in range(2):
        got = json.loads((tmp_path / f"rank{r}.json").read_text())
        gpu = r % got["n"]
        assert got["devices"] == [f"gpu:{gpu}"], got
        if got["transport"] == "nccl":
            assert got["active"] == [gpu], got  # NCCL's setup made the context there, and nowhere else
        else:
            # MPI through host memory touches no GPU until the first step: no context yet, or
            # one on its own GPU only.
            assert set(got["active"]) <= {gpu}, got
        if got["n"] == 1:
            assert got["transport"] == "mpi", got  # NCCL refuses two ranks on one GPU


@on_gpu
def test_a_mirrored_strategy_without_devices_takes_every_visible_gpu():
    """MirroredStrategy() is one replica per visible GPU (what --gres granted): contexts on all of
    them, expected, and on no GPU before it is created."""
    got = fresh_python("""
        import json, hpcnn
        from hpcnn import _core
        n = len(_core.cuda_devices())
        before = [i for i in range(n) if _core.cuda_primary_context_active(i)]
        strategy = hpcnn.distribute.MirroredStrategy()
        after = [i for i in range(n) if _core.cuda_primary_context_active(i)]
        print(json.dumps({"n": n, "before": before, "after": after, "devices": list(strategy.local_devices),
                          "replicas": strategy.num_replicas_in_sync}))
    """)
    n = got["n"]
    assert got["before"] == []
    assert got["devices"] == [f"gpu:{i}" for i in range(n)] and got["replicas"] == n
    if _core.distribute.nccl_compiled():
        assert got["after"] == list(range(n))  # NCCL's communicators are made (and connected) now
    else:
        assert set(got["after"]) <= set(range(n))  # the host transport touches no GPU before a step
