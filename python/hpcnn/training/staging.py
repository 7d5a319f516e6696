"""One core call per batch that also stages the next batch (on a GPU its upload overlaps this
step's backward pass): the one stepping loop of fit, evaluate and predict (epoch_iterator.py)
passes each batch and the one after it. The core keeps what it staged: the call given that same batch object takes it (no second
conversion, no second upload). Python keeps no record of it; a loop left early releases it."""
from __future__ import annotations

from typing import Any, Callable, Optional

# Each step call also stages the next batch. Costs nothing measurable on the CPU (the staging work
# only moves from one call to the one before), so it is always on; the tests switch it off to
# compare (then every call stages its own batch).
STAGE_NEXT = True

Batch = Any  # the core's batch tuple (data_adapters.Batch)


class StagedSteps:
    """``call(batch, next)`` once per batch (next None at the last one), and, as a context manager,
    the release of a batch the core still holds when the loop is left early."""

    def __init__(self, core: Any) -> None:
        self.core = core

    def __enter__(self) -> "StagedSteps":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def step(self, call: Callable[[Any, Any], Any], current: Batch, upcoming: Optional[Batch]) -> Any:
        return call(current, upcoming if STAGE_NEXT else None)

    def close(self) -> None:
        self.core.drop_staged()  # releases a staged batch's arrays (nothing when none is staged)
