"""Plots of the tutorial: training curves and a grid of predictions (matplotlib, optional).

    hpcnn.plot.history(history, path='curves.png')
    hpcnn.plot.predictions(x, y_true, y_pred, class_names, path='predictions.png')
"""
from __future__ import annotations

import os
from typing import Any, Dict, Optional, Sequence

import numpy as np


def _plt():
    try:
        import matplotlib
        if not os.environ.get("DISPLAY") and "ipykernel" not in __import__("sys").modules:
            matplotlib.use("Agg")  # batch jobs have no display
        import matplotlib.pyplot as plt
        return plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install matplotlib (or `pip install hpcnn[plot]`)") from e


def _save(fig: Any, path: Optional[str]) -> None:
    if path:
        tmp = f"{path}.tmp{os.getpid()}.png"
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)  # never a half-written image


def history(hist: Any, path: Optional[str] = None, title: str = "", compare: Optional[Dict[str, Any]] = None):
    """Loss and accuracy per epoch (train and validation), as the tutorial draws them. ``compare``
    maps labels to more histories (e.g. {'GPU': gpu_history}) drawn on the same axes."""
    plt = _plt()
    runs = {"": hist} if not compare else {"CPU" if not title else title: hist, **compare}
    fig, axes = plt.subplots(1, 2, figsize=[14, 5])
    for label, h in runs.items():
        hh = getattr(h, "history", h)
        pre = f"{label} " if label else ""
        for ax, key in ((axes[0], "loss"), (axes[1], "accuracy")):
            short = key[:3] if key == "accuracy" else key
            if key in hh:
                ax.plot(range(1, len(hh[key]) + 1), hh[key], "o-", label=f"{pre}train_{short}")
            if f"val_{key}" in hh:
                ax.plot(range(1, len(hh[f"val_{key}"]) + 1), hh[f"val_{key}"], "o--", label=f"{pre}val_{short}")
    axes[0].set_title("Loss")
    axes[1].set_title("Accuracy")
    from matplotlib.ticker import MaxNLocator
    for ax in axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_xlabel("epoch")
        ax.legend()
        ax.grid(True)
    _save(fig, path)
    return fig


def predictions(x: np.ndarray, y_true: Sequence[int], y_pred: Sequence[int], class_names: Sequence[str],
                path: Optional[str] = None, count: int = 20, cols: int = 5):
    """A grid of images titled 'y: true / p: predicted' (the tutorial's last figure)."""
    plt = _plt()
    count = min(count, len(x))
    rows = (count + cols - 1) // cols
    fig = plt.figure(figsize=(8, 2 * rows))
    for i in range(count):
        ax = fig.add_subplot(rows, cols, i + 1)
        img = np.asarray(x[i])
        if img.dtype != np.uint8:
            img = np.clip(img, 0, 1)
        ax.imshow(img.squeeze(), cmap="gray" if img.ndim == 2 or img.shape[-1] == 1 else None)
        ok = int(y_true[i]) == int(y_pred[i])
        ax.set_title(f"y: {class_names[int(y_true[i])]}\np: {class_names[int(y_pred[i])]}", fontsize=9, loc="left",
                     color="black" if ok else "red")
        ax.axis("off")
    fig.subplots_adjust(wspace=0.5, hspace=0.6)
    _save(fig, path)
    return fig


def benchmark(csv_path: str, path: Optional[str] = None, metric: str = "mean_speed"):
    """Bar chart of images/s (with uncertainty) per framework/mode from a bench CSV."""
    import csv
    plt = _plt()
    with open(csv_path, newline="") as f:
        rows = list(csv.DictReader(f))
    labels = [f"{r.get('framework', r.get('device', '?'))}\n{r.get('mode', '')}" for r in rows]
    vals = [float(r[metric]) for r in rows]
    errs = [float(r.get("speed_uncertainty") or 0) for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, len(rows)), 4))
    ax.bar(range(len(rows)), vals, yerr=errs, capsize=4)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("images / s")
    ax.grid(True, axis="y")
    _save(fig, path)
    return fig
