"""One rank of the data-parallel tests (tests/test_distribute_mpi.py starts it with mpirun).

    mpirun -np 2 python tests/dist_worker.py SCENARIO OUTDIR

Every rank trains with MultiWorkerMirroredStrategy on the CPU and writes what the test compares
into OUTDIR/rank<R>.npz (weights, evaluate's numbers). The data and the reference model are made
by dist_common (the same code the test uses for its one-process reference).
"""
import os
import signal
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import hpcnn  # noqa: E402
from dist_common import BATCH, augmented_model, make_arrays, make_model, residual_model, write_h5  # noqa: E402


def main() -> None:
    scenario, out = sys.argv[1], sys.argv[2]
    strategy = hpcnn.distribute.MultiWorkerMirroredStrategy(device="cpu")
    rank = strategy.worker_index
    result = {"replicas": np.array(strategy.num_replicas_in_sync), "rank": np.array(rank)}
    x, y = make_arrays()
    if scenario == "mismatch":  # rank 1 runs another model (another seed): both ranks must refuse
        try:
            with strategy.scope():
                make_model(seed=21 + rank)
        except ValueError as err:
            print(f"rank {rank}: ValueError: {err}", flush=True)
            np.savez(os.path.join(out, f"mismatch_rank{rank}.npz"), refused=np.array(1))
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
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    result["weights"] = np.concatenate([w.ravel() for w in model.get_weights()])
    result["iterations"] = np.array(model.optimizer.iterations)
    np.savez(os.path.join(out, f"{scenario}_rank{rank}.npz"), **result)


if __name__ == "__main__":
    main()
