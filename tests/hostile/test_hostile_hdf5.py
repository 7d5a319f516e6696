"""Hostile HDF5 files: hundreds of damaged files, each a clean exception or the right data.

The cases come from tests/support/hostile_hdf5.py (a seeded generator: see its docstring for the damage
and the judging). They run in worker subprocesses, many cases per worker for speed, two workers
at a time: a case that crashes (a segfault, an abort from heap corruption) or hangs takes down
only its worker. The driver then names the case, re-runs it alone to confirm, and carries on
with the rest of that worker's cases in a new one.

    HPCNN_HOSTILE_CASES=5000 HPCNN_HOSTILE_SEED=7 python -m pytest -q tests/hostile/test_hostile_hdf5.py

runs more cases or another seed (CI runs the default: the cases of its row in tests/support/hostile_corpora.py, seed 12).
"""
from __future__ import annotations


import pytest

pytest.importorskip("h5py")
from tests.support import hostile_hdf5
from tests.support.hostile_corpora import CORPORA

CORPUS = CORPORA["hdf5"]  # its row: generator, cases, batch, variables
run_cases = CORPUS.run


def test_hostile_hdf5_files():
    n, seed = CORPUS.count(), CORPUS.seed(hostile_hdf5.DEFAULT_SEED)
    results, problems, h5py_crashed = run_cases(seed, list(range(n)))
    fails = [f"case {c} ({r['desc']}):\n    " + "\n    ".join(r["fails"]) for c, r in sorted(results.items())
             if r["fails"]]
    assert not problems, "crashes or hangs:\n" + "\n".join(problems)
    assert len(results) == n, f"{n - len(results)} cases gave no result"
    assert not fails, f"{len(fails)} of {n} cases failed (seed {seed}):\n" + "\n".join(fails[:30])
    # The generator must really test both answers: files hpcnn refuses and files it reads.
    raised = sum(1 for r in results.values() if "raised" in r["did"].values())
    read = sum(1 for r in results.values() if "data" in r["did"].values())
    h5py_read = sum(1 for r in results.values() if r.get("h5py_read"))  # a harness error has no such field
    print(f"\nhostile HDF5: {n} cases (seed {seed}): hpcnn refused a reading in {raised}, returned data in {read}; "
          f"h5py read {h5py_read} of the files and crashed on {len(h5py_crashed)}")
    assert raised > n // 5 and read > n // 5 and h5py_read > n // 5, (raised, read, h5py_read)


def test_the_driver_names_a_crashing_case():
    results, problems, _ = run_cases(hostile_hdf5.DEFAULT_SEED, list(range(6)), workers=1, batch=6, inject="crash:3")
    assert len(problems) == 1 and problems[0].startswith("case 3 ") and "died" in problems[0], problems
    assert "alone: exit status" in problems[0] and "--cases 3" in problems[0]
    assert sorted(results) == [0, 1, 2, 4, 5]  # the cases after the crash ran in a new worker


def test_the_driver_names_a_hanging_case():
    results, problems, _ = run_cases(hostile_hdf5.DEFAULT_SEED, list(range(4)), workers=1, batch=4, inject="hang:1",
                                     timeout=5)
    assert len(problems) == 1 and problems[0].startswith("case 1 ") and "hang" in problems[0], problems
    assert sorted(results) == [0, 2, 3]


def test_the_driver_reruns_a_case_h5py_crashed_on_without_it():
    results, problems, crashed = run_cases(hostile_hdf5.DEFAULT_SEED, list(range(4)), workers=1, batch=4,
                                           inject="h5py-crash:2")
    assert not problems and crashed == {2} and sorted(results) == [0, 1, 2, 3], (problems, crashed)
    assert not results[2]["h5py_read"]
