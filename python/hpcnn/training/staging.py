"""One core call per batch that also stages the next batch (on a GPU its upload overlaps this
step's backward pass; the following call passes None for the batch the core already holds): the
loops of fit, evaluate and predict share this one bookkeeping of what the core holds."""
from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Optional

# Each step call also stages the next batch. Costs nothing measurable on the CPU (the staging work
# only moves from one call to the one before), so it is always on; the tests switch it off to
# compare (then every call stages its own batch).
STAGE_NEXT = True

Batch = Any  # the core's batch tuple (data_adapters.Batch)


class StagedSteps:
    """Step calls ``step(batch, next)`` over a sequence of batches: each call trains (or tests, or
    predicts) on its batch and stages `next`; the call after it passes None for that batch.
    ``close()`` releases a batch left staged when the loop is left early (use it as a context
    manager)."""

    def __init__(self, core: Any) -> None:
        self.core = core
        self.staged = False  # whether the core holds the batch of the next call (staged by the last)

    def __enter__(self) -> "StagedSteps":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def step(self, call: Callable[[Any, Any], Any], current: Batch, upcoming: Optional[Batch]) -> Any:
        """``call(current or None, upcoming)``: None when the last call staged `current`;
        `upcoming` is staged now (unless staging is off)."""
        nxt = upcoming if STAGE_NEXT else None
        try:
            out = call(None if self.staged else current, nxt)
        except BaseException:
            self.staged = False  # the step stopped before staging the next batch
            raise
        self.staged = nxt is not None
        return out

    def close(self) -> None:
        if self.staged:
            self.core.drop_staged()  # left early: release the staged batch's arrays now
            self.staged = False


def first_batches(batches: Iterator[Batch], total: int) -> Iterator[Batch]:
    """The first `total` batches; the source (a dataset's producer) is closed when they are taken
    or the loop is left early."""
    try:
        yield from itertools.islice(batches, total)
    finally:
        if hasattr(batches, "close"):
            batches.close()


def run_steps(core: Any, call: Callable[[Any, Any], Any], batches: Iterator[Batch]) -> Iterator[Any]:
    """``call(batch, next)`` over `batches`, one call per batch, each staging the next."""
    it = iter(batches)
    current = next(it, None)
    with StagedSteps(core) as steps:
        while current is not None:
            upcoming = next(it, None)
            out = steps.step(call, current, upcoming)
            current = upcoming
            yield out
