"""The hostile-file corpora, one row each: which generator makes the cases (a module of tests/support
that also runs them as a worker, ``python -m tests.support.<module>``), how many cases the default
run checks, how many a worker takes, and the variables that change the run. The tests in
tests/hostile/ read their row; docs/reliability.md describes the damage each generator does.

    HPCNN_HOSTILE_CASES=5000 HPCNN_HOSTILE_SEED=7 python -m pytest -q tests/hostile/test_hostile_hdf5.py"""
from __future__ import annotations

import dataclasses
import os

from tests.support import hostile_driver

WORKERS = 2  # worker processes at a time


@dataclasses.dataclass(frozen=True)
class Corpus:
    module: str       # tests/support/<module>.py: the seeded generator and its worker
    cases: int        # cases in the default run
    batch: int        # cases per worker process
    cases_env: str    # the variable that sets the number of cases
    seed_env: str     # ... the seed (default: the module's DEFAULT_SEED)
    timeout_env: str  # ... the seconds without progress that make a hang (default 60)
    reference: bool = False  # h5py reads every file too (a crash there is h5py's, not hpcnn's)

    def timeout(self) -> float:
        """A case that makes no progress for this long is a hang (a slow case takes well under a
        second; sanitizer builds are a few times slower)."""
        return float(os.environ.get(self.timeout_env, 60))

    def count(self) -> int:
        return int(os.environ.get(self.cases_env, self.cases))

    def seed(self, default: int) -> int:
        return int(os.environ.get(self.seed_env, default))

    def run(self, seed, cases, workers=WORKERS, batch=None, timeout=None, inject=None):
        """hostile_driver.run_cases for this corpus: ({case: result}, [problems], {cases h5py crashed on})."""
        return hostile_driver.run_cases(self.module, seed, cases, workers, batch or self.batch,
                                        self.timeout() if timeout is None else timeout, inject, reference=self.reference)


CORPORA = {
    "hdf5": Corpus("hostile_hdf5", 600, 50, "HPCNN_HOSTILE_CASES", "HPCNN_HOSTILE_SEED", "HPCNN_HOSTILE_TIMEOUT",
                   reference=True),
    "model_h5": Corpus("hostile_model_h5", 240, 75, "HPCNN_HOSTILE_H5_CASES", "HPCNN_HOSTILE_H5_SEED",
                       "HPCNN_HOSTILE_TIMEOUT"),
    "models": Corpus("hostile_models", 600, 150, "HPCNN_HOSTILE_MODEL_CASES", "HPCNN_HOSTILE_MODEL_SEED",
                     "HPCNN_HOSTILE_MODEL_TIMEOUT"),
}
