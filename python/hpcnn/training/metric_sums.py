"""Running sums over an epoch's batches (loss, correct count, rows seen, the core metrics' sums),
the logs they give, and what evaluate and *_on_batch return."""
from __future__ import annotations

from typing import Any, Dict, List, Tuple

# A running sum over an epoch's batches: (loss sum, correct count, rows seen, the core metrics' sums).
Sums = Tuple[float, float, int, List[float]]


def core_metric_count(comp: Dict[str, Any]) -> int:
    return sum(1 for src, _ in comp.get("metric_sources", []) if src == "core")


def zero_sums(comp: Dict[str, Any]) -> Sums:
    return (0.0, 0.0, 0, [0.0] * core_metric_count(comp))


def restored_metric_sums(comp: Dict[str, Any], position: Dict[str, Any]) -> List[float]:
    """The core metrics' sums of a backup's partly trained epoch (zeros if it has none for them)."""
    saved = position.get("metric_sums")
    k = core_metric_count(comp)
    if isinstance(saved, list) and len(saved) == k and all(isinstance(v, (int, float)) for v in saved):
        return [float(v) for v in saved]
    return [0.0] * k


def add_step(sums: Sums, step: Tuple[float, float, int, List[float]]) -> Sums:
    """`sums` plus one train/test step's result (loss sum, correct, rows, metric sums): the core
    returns them together, so a batch costs one call."""
    loss_sum, correct, rows, metric_sums = step
    return (sums[0] + loss_sum, sums[1] + correct, sums[2] + rows,
            [a + v for a, v in zip(sums[3], metric_sums)] if sums[3] else sums[3])


def metric_logs(comp: Dict[str, Any], sums: Sums) -> Dict[str, float]:
    """Each compiled metric's mean over the rows seen, under its name (compile's order)."""
    seen = max(sums[2], 1)
    return {name: (sums[1] if src == "correct" else sums[3][i]) / seen
            for name, (src, i) in zip(comp.get("metrics", []), comp.get("metric_sources", []))}


def batch_result(model: Any, step: Tuple[float, float, int, List[float]], return_dict: bool):
    """What train_on_batch / test_on_batch return for one step's result."""
    loss_sum, correct, rows, metric_sums = step
    sums = (loss_sum, correct, rows, list(metric_sums))
    return result({"loss": loss_sum / rows, **metric_logs(model.compile_settings, sums)}, return_dict)


def result(res: Dict[str, float], return_dict: bool):
    """What evaluate and *_on_batch return, as Keras does: [loss, metrics...], the loss alone
    without metrics, or a dict."""
    if return_dict:
        return dict(res)
    values = list(res.values())
    return values if len(values) > 1 else values[0]
