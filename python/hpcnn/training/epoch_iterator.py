"""``EpochIterator``: the batches of one data source, epoch by epoch, and the one stepping loop that
fit, evaluate and predict share (as Keras' trainers/epoch_iterator.py). The data's kind (arrays, a
dataset, a Python generator) is asked once, when the iterator is made; each loop then takes
``Step`` objects and makes one core call per step. The loop fetches batch b+1 before batch b's step
so that the step stages it (staging.py); an error fetching or preparing a batch is kept and raised
at that batch's turn, so the batches before it still run."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Optional, Tuple

import numpy as np

from .data_adapters import (Batch, WithWeights, array_batches, dataset_batches, is_dataset, is_generator,
                            prepare_inputs, prepare_sample_weight, prepare_targets)
from .staging import StagedSteps

ARRAYS, DATASET, GENERATOR = "arrays", "dataset", "generator"
FIT, EVALUATE, PREDICT = "fit", "evaluate", "predict"


def data_kind(x: Any) -> str:
    """ARRAYS, DATASET (an hpcnn dataset, a PyDataset / Sequence) or GENERATOR (no length)."""
    if is_generator(x):
        return GENERATOR
    return DATASET if is_dataset(x) else ARRAYS


class Step:
    """One batch's turn: ``run(call)`` makes the core call on it (staging the next batch), or raises
    the error that fetching or preparing it raised."""
    __slots__ = ("batch", "item", "upcoming", "error", "staged")

    def __init__(self, batch: int, item: Any, upcoming: Optional[Batch], error: Optional[BaseException],
                 staged: StagedSteps) -> None:
        self.batch, self.item, self.upcoming, self.error, self.staged = batch, item, upcoming, error, staged

    def run(self, call: Callable[[Any, Any], Any]) -> Any:
        if self.error is not None:
            raise self.error
        return self.staged.step(call, self.item, self.upcoming)


class EpochIterator:
    """The batches of `x` (and `y`, `sample_weight` for arrays) for `mode` (FIT, EVALUATE or
    PREDICT): `steps` batches per epoch, shuffled by the model's seed and the epoch when `shuffle`.
    Arrays must be prepared already (prepare_arrays); a dataset's batches are prepared here."""

    def __init__(self, model: Any, x: Any, y: Any = None, sample_weight: Optional[np.ndarray] = None, *,
                 mode: str, steps: int, batch_size: Optional[int] = None, shuffle: bool = False,
                 kind: Optional[str] = None) -> None:
        self.model, self.x, self.y, self.sample_weight = model, x, y, sample_weight
        self.mode, self.steps, self.batch_size, self.shuffle = mode, steps, batch_size, shuffle
        self.kind = kind if kind is not None else data_kind(x)

    @property
    def is_dataset(self) -> bool:
        """Batches of a dataset or a generator (they size themselves), not arrays fit slices."""
        return self.kind != ARRAYS

    @property
    def is_generator(self) -> bool:
        return self.kind == GENERATOR

    # ------------------------------------------------------------------ the batches
    def raw_batches(self, epoch: int, first: int) -> Iterator[Batch]:
        """The core's batch tuples of `epoch` from batch `first` on, as the source gives them."""
        model, x = self.model, self.x
        if self.kind == ARRAYS:
            if self.mode == PREDICT:
                bs = self.batch_size
                return ((x[b * bs:(b + 1) * bs], None, None, None, None) for b in range(first, self.steps))
            return array_batches(model, x, self.y, self.batch_size, self.shuffle, epoch, first, self.sample_weight)
        if self.mode == PREDICT:
            return dataset_batches(model, x, epoch, False, first, x_only=True, shard=False,
                                   generator=self.is_generator)
        return dataset_batches(model, x, epoch, self.shuffle, first, generator=self.is_generator)

    def prepare(self, item: Batch) -> Batch:
        """A dataset's batch as the core takes it (arrays come prepared)."""
        if self.kind == ARRAYS:
            return item
        xb, yb, rows, decode, wb = item[:5]
        if self.mode == PREDICT:
            return (prepare_inputs(xb), None, None, decode, None)
        if isinstance(yb, WithWeights):
            yb, wb = yb.y, yb.w
        xb = prepare_inputs(xb)
        yb = prepare_targets(self.model, yb)
        wb = prepare_sample_weight(wb, len(xb), self.mode, "the batch's sample weights")
        return (xb, yb, rows, decode, wb) + tuple(item[5:])  # + (first_row, global_rows): a rank's share

    def fetch(self, it: Iterator[Batch]) -> Optional[Tuple[Any, Optional[BaseException], bool]]:
        """(prepared batch, None, True), or (None, the error, fetching failed?) kept to be raised at
        the batch's turn, or None at the end."""
        try:
            item = next(it)
        except StopIteration:
            return None
        except Exception as err:  # Ctrl-C (KeyboardInterrupt) is not caught: it stops the loop as before
            return None, err, True
        try:
            return self.prepare(item), None, False
        except Exception as err:  # raised (and a ValueError numbered by fit) at the batch's turn
            return None, err, False

    # ------------------------------------------------------------------ the stepping loop
    def steps_of(self, epoch: int = 0, first: int = 0,
                 before: Optional[Callable[[int], None]] = None) -> Iterator[Step]:
        """The batches first..steps-1 of `epoch`, one ``Step`` each: `before(b)` (fit's
        on_train_batch_begin) is called first, then batch b+1 is fetched, so that b's call stages
        it. A generator's error is raised at its batch's turn, before `before`; an error preparing
        a batch comes from its ``Step.run``. Close the iterator (or run it out) to release what the
        core staged and stop a dataset's producer."""
        batches: Iterator[Batch] = self.raw_batches(epoch, first)
        if self.kind == GENERATOR or self.mode != FIT:
            # A generator gives no more than the epoch's batches: the next epoch continues where this
            # one ends. evaluate and predict take exactly their steps (a Sequence's on_epoch_end is fit's).
            batches = itertools.islice(batches, max(self.steps - first, 0))
        staged = StagedSteps(self.model.core)
        try:
            it = iter(batches)
            current = self.fetch(it)
            b = first
            while current is not None:
                item, error, fetching = current
                if fetching:
                    raise error
                if b >= self.steps:
                    break
                if before is not None:
                    before(b)
                upcoming = self.fetch(it)
                ahead = upcoming[0] if b + 1 < self.steps and upcoming is not None else None
                yield Step(b, item, ahead, error, staged)
                current = upcoming
                b += 1
        finally:
            staged.close()  # a batch left staged when stopping early: release its arrays now
            if hasattr(batches, "close"):
                batches.close()  # stops a dataset's producer when we leave early
