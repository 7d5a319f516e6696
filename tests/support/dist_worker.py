"""One rank of the data-parallel tests (tests/core/distribute/test_distribute_mpi.py starts it with mpirun).

    mpirun -np 2 python -m tests.support.dist_worker SCENARIO OUTDIR

Every rank trains with MultiWorkerMirroredStrategy on the CPU and writes what the test compares
into OUTDIR/rank<R>.npz (weights, evaluate's numbers). The data and the reference model are made
by dist_common (the same code the test uses for its one-process reference).

tests/gpu/test_gpu_distribute.py sets HPCNN_TEST_DIST_DEVICE ('cpu', the default; 'gpu': rank r on
gpu:(r % visible GPUs); or a device name such as 'gpu:0' for every rank) and
HPCNN_TEST_DIST_IMPLEMENTATION (CommunicationOptions' implementation, default 'auto').
"""
import os
import signal
import sys

import numpy as np

import hpcnn
from hpcnn import _core
from tests.support.dist_common import (BATCH, augmented_model, fit_resumable, groups_fit, make_arrays, make_model,
                         residual_model, write_groups_h5, write_h5)


def main() -> None:
    scenario, out = sys.argv[1], sys.argv[2]
    device = os.environ.get("HPCNN_TEST_DIST_DEVICE", "cpu")
    if device != "cpu":
        _core.cuda_set_tf32(False)  # compared with one GPU at 1e-5: IEEE float32 math (tests/conftest.py)
    if device == "gpu":
        world = _core.distribute.mpi_init()
        device = f"gpu:{world['rank'] % len(_core.cuda_devices())}"
    options = hpcnn.distribute.CommunicationOptions(
        implementation=os.environ.get("HPCNN_TEST_DIST_IMPLEMENTATION", "auto"))
    if scenario == "refused":  # the strategy itself must refuse on every rank
        rank = _core.distribute.mpi_init()["rank"]
        try:
            hpcnn.distribute.MultiWorkerMirroredStrategy(communication_options=options, device=device)
        except ValueError as err:
            print(f"rank {rank}: ValueError: {err}", flush=True)
            np.savez(os.path.join(out, f"refused_rank{rank}.npz"), refused=np.array(1))
        return
    if scenario == "nccl_setup_failure":  # rank 1 fails inside NCCL's setup: rank 0 must stop too
        if _core.distribute.mpi_init()["rank"] == 1:
            _core.distribute.inject_nccl_setup_failure(1)
    strategy = hpcnn.distribute.MultiWorkerMirroredStrategy(communication_options=options, device=device)
    rank = strategy.worker_index
    print(f"rank {rank}: implementation {strategy.implementation} on {device}", flush=True)
    result = {"replicas": np.array(strategy.num_replicas_in_sync), "rank": np.array(rank),
              "implementation": np.array(strategy.implementation)}
    x, y = make_arrays()
    if scenario == "mismatch":  # rank 1 runs another model (another seed): both ranks must refuse
        try:
            with strategy.scope():
                make_model(seed=21 + rank)
        except ValueError as err:
            print(f"rank {rank}: ValueError: {err}", flush=True)
            np.savez(os.path.join(out, f"mismatch_rank{rank}.npz"), refused=np.array(1), message=np.array(str(err)))
        return
    if scenario in ("version_mismatch", "chief_version_mismatch"):
        # rank 1 (chief_...: rank 0, of 3, with one differing rank detailed) reports another hpcnn
        # version: every rank must refuse
        odd = 0 if scenario.startswith("chief") else 1
        if scenario.startswith("chief"):
            hpcnn.distribute._RANKS_SHOWN = 1
        if rank == odd:
            real = hpcnn.distribute.build_description
            hpcnn.distribute.build_description = lambda: dict(real(), **{"hpcnn version": "0.0.0-test"})
        try:
            with strategy.scope():
                make_model()
        except hpcnn.distribute.RanksDisagree as err:
            print(f"rank {rank}: RanksDisagree: {err}", flush=True)
            np.savez(os.path.join(out, f"{scenario}_rank{rank}.npz"), refused=np.array(1), message=np.array(str(err)))
        return
    if scenario == "shuffle_mismatch":  # rank 1 reads the dataset in another order: refused before any step
        path = os.path.join(out, "data.h5")
        if rank == 0:
            write_h5(path, x, y)
        strategy.group.barrier()
        with strategy.scope():
            model = make_model()
        try:
            with hpcnn.data.HDF5Dataset(path, batch_size=BATCH, seed=7, shuffle="rows" if rank else "chunk_groups") as ds:
                model.fit(ds, epochs=1, verbose=0)
        except hpcnn.distribute.RanksDisagree as err:
            np.savez(os.path.join(out, f"{scenario}_rank{rank}.npz"), refused=np.array(1), message=np.array(str(err)),
                     iterations=np.array(model.optimizer.iterations))
        return
    if scenario == "rows_mismatch":  # rank 1 is given one batch fewer: refused before any step
        with strategy.scope():
            model = make_model()
        before = np.concatenate([w.ravel() for w in model.get_weights()])
        steps = []
        cb = hpcnn.callbacks.LambdaCallback(on_train_batch_begin=lambda batch, logs: steps.append(batch))
        n = len(x) - BATCH * rank
        try:
            model.fit(x[:n], y[:n], batch_size=BATCH, epochs=1, verbose=0, callbacks=[cb])
        except hpcnn.distribute.RanksDisagree as err:
            print(f"rank {rank}: RanksDisagree: {err}", flush=True)
            after = np.concatenate([w.ravel() for w in model.get_weights()])
            np.savez(os.path.join(out, f"rows_mismatch_rank{rank}.npz"), refused=np.array(1),
                     message=np.array(str(err)), steps=np.array(len(steps)),
                     iterations=np.array(model.optimizer.iterations),
                     unchanged=np.array(bool(np.array_equal(before, after))))
        return
    with strategy.scope():
        model = {"functional": residual_model, "augment": augmented_model}.get(scenario, make_model)()
    if scenario in ("functional", "augment"):  # a graph model; a model that augments  # a graph model (residual Add, Concatenate, dropout)
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
        result["evaluate"] = np.array(model.evaluate(x, y, batch_size=BATCH, verbose=0))
    elif scenario == "arrays":
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0)
        result["evaluate"] = np.array(model.evaluate(x, y, batch_size=BATCH, verbose=0))
        csv = os.path.join(out, f"log_rank{rank}.csv")
        model.fit(x, y, batch_size=BATCH, epochs=1, shuffle=True, verbose=0,
                  callbacks=[hpcnn.callbacks.CSVLogger(csv)])
        model.save(os.path.join(out, f"model_rank{rank}.h5"))
    elif scenario == "hdf5":
        path = os.path.join(out, "data.h5")
        if rank == 0:
            write_h5(path, x, y)
        strategy.group.barrier()
        with hpcnn.data.HDF5Dataset(path, batch_size=BATCH, shuffle=True, seed=7) as ds:
            model.fit(ds, epochs=1, verbose=0)
            result["evaluate"] = np.array(model.evaluate(ds, verbose=0))
    elif scenario == "groups":  # the chunk-group shuffle, streamed: each rank reads ~1/ranks of the file
        path = os.path.join(out, "groups.h5")
        if rank == 0:
            write_groups_h5(path)
        strategy.group.barrier()
        stats = groups_fit(model, path)
        for key in ("blocks_read", "num_blocks", "bytes_read", "bytes_inflated", "peak_cached_bytes"):
            result[key] = np.array(stats[key])
    elif scenario in ("fail_first_bucket", "stall_first_bucket"):
        # Rank 1 fails (or hangs 30 s) at step 2 after the loss statistics, before its first bucket.
        def arm(batch, logs):
            if rank == 1 and batch == 0:
                _core.distribute.inject_failure(1, 30.0 if scenario.startswith("stall") else 0.0)
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0,
                  callbacks=[hpcnn.callbacks.LambdaCallback(on_train_batch_end=arm)])
    elif scenario == "nccl_async_error":  # rank 1's NCCL reports an error at step 2's gradient sum
        def arm(batch, logs):
            if rank == 1 and batch == 0:
                _core.distribute.inject_nccl_async_error(1)
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0,
                  callbacks=[hpcnn.callbacks.LambdaCallback(on_train_batch_end=arm)])
    elif scenario == "fail":
        def boom(batch, logs):
            if rank == 1 and batch == 2:
                raise RuntimeError("boom at step 3")
        cb = hpcnn.callbacks.LambdaCallback(on_train_batch_end=boom)
        model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, callbacks=[cb])
    elif scenario == "signal":  # SIGUSR1 reaches rank 0 only: both ranks stop at the same batch
        def usr1(batch, logs):
            if rank == 0 and batch == 1:
                os.kill(os.getpid(), signal.SIGUSR1)
        cb = hpcnn.callbacks.LambdaCallback(on_train_batch_end=usr1)
        history = model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, callbacks=[cb])
        result["interrupted"] = np.array(bool(history.interrupted))
    elif scenario in ("resume1", "resume2"):
        backup = hpcnn.callbacks.BackupAndRestore(os.path.join(out, "backup"), delete_checkpoint=False)
        model.fit(x, y, batch_size=BATCH, epochs=1 if scenario == "resume1" else 2, shuffle=True, verbose=0,
                  callbacks=[backup])
    elif scenario == "rankchange_stop16":  # a backup of a global batch of 16, which 3 ranks cannot split
        history, _ = fit_resumable(model, "arrays", os.path.join(out, "backup"), stop=rank == 0, batch_size=16)
        result["interrupted"] = np.array(bool(history.interrupted))
    elif scenario == "rankchange_refused16":  # ... resumed on 3 ranks: fit raises before the first step
        fit_resumable(model, "arrays", os.path.join(out, "backup"), batch_size=16)
    elif scenario == "backup_locked":  # another process holds the backup directory's lock: every rank stops
        fit_resumable(model, "arrays", os.path.join(out, "backup"))
    elif scenario.startswith("rankchange_"):  # rankchange_{stop,resume}_{arrays,hdf5,groups}: a backup, another count
        _, phase, kind = scenario.split("_")
        data = "arrays"
        if kind in ("hdf5", "groups"):
            data = os.path.join(out, "data.h5")
            if rank == 0 and not os.path.exists(data):
                write_h5(data, x, y)
            strategy.group.barrier()
        history, backup = fit_resumable(model, data, os.path.join(out, "backup"), stop=phase == "stop" and rank == 0,
                                        shuffle="chunk_groups" if kind == "groups" else True)
        result["interrupted"] = np.array(bool(history.interrupted))
        result["resumed_from"] = np.array([-1, -1] if backup.resumed_from is None else
                                          [backup.resumed_from["epoch"], backup.resumed_from["batch"]])
    elif scenario == "tensorboard":  # every rank logs to the same folder: only the chief may write
        tb = hpcnn.callbacks.TensorBoard(os.path.join(out, "tb"), update_freq="batch")
        model.fit(x, y, batch_size=BATCH, epochs=2, verbose=0, validation_data=(x, y), callbacks=[tb])
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    result["weights"] = np.concatenate([w.ravel() for w in model.get_weights()])
    result["iterations"] = np.array(model.optimizer.iterations)
    np.savez(os.path.join(out, f"{scenario}_rank{rank}.npz"), **result)


if __name__ == "__main__":
    main()
