"""The figures of the lessons (notebooks 01-03 and ``hpcnn tutorial``), drawn with matplotlib
(optional: the ``plot`` or ``jupyter`` extra). One call per figure:

    hpcnn.plot.samples(x, y, class_names, data='CIFAR-10')                 # a grid of training images
    hpcnn.plot.history(history, label='CPU', compare={'GPU': gpu_history})  # loss and accuracy curves
    hpcnn.plot.predictions(x, y_true, y_pred, class_names, device='CPU')  # wrong ones in red
    hpcnn.plot.confusion(matrix, class_names, device='GPU')               # true x predicted counts
    hpcnn.plot.benchmark('bench.csv')                                      # images/s per device

Each figure says in its title what it shows, on which device and which data; with
``synthetic=True`` it also carries the words "synthetic data" as a figure-level text in a band of
its own (not in a title that a narrow output could cut), so that an accuracy on generated noise
cannot be read as a result on real images. Grids of images are sized to the grid: square
thumbnails without ticks, a caption row above each, and no empty band. With ``path`` the figure is
also written there (PNG, atomically). Every function returns the matplotlib Figure.
"""
from __future__ import annotations

import csv
import math
import os
import sys
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

SYNTHETIC_LABEL = "synthetic data"
SYNTHETIC_NOTE = "generated images, not a result on real data"

# Grid geometry, in inches: a thumbnail, the caption above it (per line of text), the gaps.
THUMB = 1.25
CAPTION_LINE = 0.19
GAP = 0.12
MARGIN = 0.1
HEADER_LINE = 0.27   # one line of the figure's title
FOOTER = 0.4         # the band that holds the synthetic-data label


def _plt():
    """matplotlib.pyplot, on the Agg backend where there is no display and no notebook."""
    try:
        import matplotlib
        if not os.environ.get("DISPLAY") and "ipykernel" not in sys.modules:
            matplotlib.use("Agg")  # batch jobs have no display
        import matplotlib.pyplot as plt
        return plt
    except ImportError as e:  # pragma: no cover - depends on the environment
        raise ImportError("plots need matplotlib: pip install matplotlib (or, in the hpcnn clone, "
                          "pip install --no-build-isolation \".[plot]\")") from e


def _save(fig: Any, path: Optional[str]) -> None:
    if path:
        tmp = f"{path}.tmp{os.getpid()}.png"
        fig.savefig(tmp, dpi=110, bbox_inches="tight")
        os.replace(tmp, path)  # never a half-written image


def title_for(what: str, device: str = "", data: str = "") -> str:
    """'what (device, data)': the title every figure carries, e.g. 'Training curves (CPU, CIFAR-10)'."""
    about = ", ".join(part for part in (device, data) if part)
    return f"{what} ({about})" if about else what


def _label_synthetic(fig: Any, synthetic: bool, bottom_in: float) -> None:
    """With synthetic data, 'synthetic data' written across the figure's bottom band (bottom_in
    inches high, kept free for it), in a box, in the figure's own coordinates."""
    if not synthetic:
        return
    height = fig.get_figheight()
    fig.text(0.5, bottom_in / 2 / height, f"{SYNTHETIC_LABEL}: {SYNTHETIC_NOTE}", ha="center", va="center",
             fontsize=11, fontweight="bold", color="darkred", gid="synthetic-data",
             bbox={"boxstyle": "round,pad=0.3", "facecolor": "mistyrose", "edgecolor": "darkred"})


def _thumbnail_grid(count: int, cols: int, caption_lines: int, title_lines: int,
                    synthetic: bool) -> Tuple[Any, List[Any]]:
    """A figure holding `count` square thumbnail axes in rows of `cols`, sized to the grid: each
    thumbnail THUMB inches with its caption above it, GAP between cells, the title's lines on top
    and the synthetic-data band (when wanted) at the bottom; axes without ticks."""
    plt = _plt()
    cols = max(1, min(cols, count))
    rows = max(1, math.ceil(count / cols))
    cell_h = caption_lines * CAPTION_LINE + THUMB
    header = title_lines * HEADER_LINE + GAP
    footer = FOOTER if synthetic else MARGIN
    width = 2 * MARGIN + cols * THUMB + (cols - 1) * GAP
    height = header + rows * cell_h + (rows - 1) * GAP + footer
    fig = plt.figure(figsize=(width, height))
    axes = []
    for i in range(count):
        r, c = divmod(i, cols)
        left = MARGIN + c * (THUMB + GAP)
        bottom = footer + (rows - 1 - r) * (cell_h + GAP)
        ax = fig.add_axes([left / width, bottom / height, THUMB / width, THUMB / height])
        ax.set_xticks([])
        ax.set_yticks([])
        axes.append(ax)
    return fig, axes


def _suptitle(fig: Any, text: str) -> None:
    """The title at the top of a grid figure (the header band that _thumbnail_grid keeps for it)."""
    fig.suptitle(text, y=1 - MARGIN / 2 / fig.get_figheight(), va="top", fontsize=11)


def _show(ax: Any, image: Any) -> None:
    """One image in a thumbnail: uint8 as it is, floats clipped to [0, 1], one channel in grey."""
    img = np.asarray(image)
    if img.dtype != np.uint8:
        img = np.clip(img, 0, 1)
    grey = img.ndim == 2 or img.shape[-1] == 1
    ax.imshow(img.squeeze(), cmap="gray" if grey else None, interpolation="nearest")


def samples(x: np.ndarray, y: Sequence[int], class_names: Sequence[str], count: int = 14, cols: int = 7,
            device: str = "", data: str = "", synthetic: bool = False, path: Optional[str] = None):
    """The first `count` images of a dataset, each captioned with its class (the lesson's first look
    at the data)."""
    count = min(count, len(x))
    fig, axes = _thumbnail_grid(count, cols, caption_lines=1, title_lines=1, synthetic=synthetic)
    labels = np.asarray(y).reshape(-1)
    for ax, image, label in zip(axes, x, labels):
        _show(ax, image)
        ax.set_title(class_names[int(label)], fontsize=9)
        for spine in ax.spines.values():
            spine.set_visible(False)
    _suptitle(fig, title_for("Training images", device, data))
    _label_synthetic(fig, synthetic, FOOTER)
    _save(fig, path)
    return fig


def predictions(x: np.ndarray, y_true: Sequence[int], y_pred: Sequence[int], class_names: Sequence[str],
                path: Optional[str] = None, count: int = 20, cols: int = 5, device: str = "", data: str = "",
                synthetic: bool = False):
    """A grid of images captioned 'y: true class / p: predicted class'; a wrong prediction has a
    red caption and a red frame. `device` is where the model was trained."""
    count = min(count, len(x))
    truth = np.asarray(y_true).reshape(-1)[:count].astype(int)
    guess = np.asarray(y_pred).reshape(-1)[:count].astype(int)
    wrong = int((truth != guess).sum())
    fig, axes = _thumbnail_grid(count, cols, caption_lines=2, title_lines=2, synthetic=synthetic)
    for ax, image, t, p in zip(axes, x, truth, guess):
        _show(ax, image)
        ok = t == p
        ax.set_title(f"y: {class_names[t]}\np: {class_names[p]}", fontsize=9, loc="left",
                     color="black" if ok else "red")
        for spine in ax.spines.values():   # the frame marks the wrong ones
            spine.set_visible(not ok)
            spine.set_color("red")
            spine.set_linewidth(3)
    trained = f"model trained on {device}" if device else ""
    _suptitle(fig, title_for("Predictions", trained, data)
              + f"\ny: true class, p: predicted; red: wrong ({wrong} of {count})")
    _label_synthetic(fig, synthetic, FOOTER)
    _save(fig, path)
    return fig


def _plain_figure(width: float, height: float, synthetic: bool, title_lines: int = 1) -> Tuple[Any, float, float]:
    """A figure for axes with ticks and labels; returns (figure, bottom, top) as fractions of its
    height that leave room for the tick labels, the title and the synthetic-data band."""
    plt = _plt()
    footer = FOOTER if synthetic else 0.0
    fig = plt.figure(figsize=(width, height + footer))
    total = height + footer
    bottom = (footer + 0.6) / total          # tick labels and an axis label under the axes
    top = 1 - (title_lines * HEADER_LINE + 0.35) / total
    return fig, bottom, top


def history(hist: Any, path: Optional[str] = None, label: str = "", compare: Optional[Mapping[str, Any]] = None,
            device: str = "", data: str = "", synthetic: bool = False, num_classes: Optional[int] = None):
    """Loss and accuracy per epoch, training (solid) and validation (dashed). ``label`` names the
    run (e.g. 'CPU'); ``compare`` maps labels to more histories (e.g. {'GPU': gpu_history}) drawn
    on the same axes. A History or its ``.history`` dict; a None in ``compare`` is left out.

    Both axes start at 0 and the accuracy axis ends at 1, so that noise in a run that learns
    nothing (a loss between 2.3025 and 2.3040) is drawn flat, not as a steep drop. With
    ``num_classes`` the accuracy of guessing, 1 / num_classes, is a dashed grey line named
    "chance" in the legend."""
    runs: Dict[str, Any] = {label: hist}
    runs.update({k: v for k, v in (compare or {}).items() if v is not None})
    if len(runs) > 1 and not label:
        runs = {"first" if k == "" else k: v for k, v in runs.items()}
    fig, bottom, top = _plain_figure(12, 4.6, synthetic)
    axes = fig.subplots(1, 2)
    fig.subplots_adjust(bottom=bottom, top=top, left=0.07, right=0.98, wspace=0.2)
    for name, h in runs.items():
        hh = getattr(h, "history", h)
        pre = f"{name} " if name else ""
        for ax, key in ((axes[0], "loss"), (axes[1], "accuracy")):
            if key in hh:
                line, = ax.plot(range(1, len(hh[key]) + 1), hh[key], "o-", label=f"{pre}training")
                if f"val_{key}" in hh:
                    ax.plot(range(1, len(hh[f"val_{key}"]) + 1), hh[f"val_{key}"], "o--", color=line.get_color(),
                            label=f"{pre}validation")
    epochs = max([len(getattr(h, "history", h).get("loss", [])) for h in runs.values()] + [1])
    losses = [v for h in runs.values() for key in ("loss", "val_loss")
              for v in getattr(h, "history", h).get(key, []) if v is not None and np.isfinite(v)]
    axes[0].set_ylim(0, max(losses) * 1.08 if losses and max(losses) > 0 else 1.0)
    axes[1].set_ylim(0, 1.0)
    if num_classes:
        chance = 1.0 / max(int(num_classes), 2)
        axes[1].axhline(chance, linestyle="--", linewidth=1.2, color="grey", gid="chance-level",
                        label=f"chance (1/{max(int(num_classes), 2)} = {chance:.2f})")
    for ax, name in zip(axes, ("Loss", "Accuracy")):
        ax.set_title(name)
        # Whole epochs: every one up to ten (MaxNLocator gives 0.5, 0.6, ... for a run of one or two).
        if epochs <= 10:
            ax.set_xticks(range(1, epochs + 1))
        else:
            ax.xaxis.set_major_locator(_plt().MaxNLocator(integer=True))
        ax.set_xlim(0.5, epochs + 0.5)
        ax.set_xlabel("epoch")
        ax.legend()
        ax.grid(True)
    fig.suptitle(title_for("Training curves", device, data), fontsize=12)
    _label_synthetic(fig, synthetic, FOOTER)
    _save(fig, path)
    return fig


def confusion(matrix: np.ndarray, class_names: Sequence[str], path: Optional[str] = None, device: str = "",
              data: str = "", synthetic: bool = False):
    """A confusion matrix (rows: true class, columns: predicted class) with its counts written in
    the cells. `device` is where the model was trained."""
    matrix = np.asarray(matrix)
    fig, bottom, top = _plain_figure(7.5, 6.8, synthetic)
    ax = fig.add_subplot(1, 1, 1)
    fig.subplots_adjust(bottom=bottom + 0.08, top=top, left=0.18, right=0.95)
    im = ax.imshow(matrix, cmap="Blues")
    n = len(class_names)
    ax.set_xticks(range(n))
    ax.set_xticklabels(class_names, rotation=60, ha="right")
    ax.set_yticks(range(n))
    ax.set_yticklabels(class_names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    high = matrix.max() / 2 if matrix.size else 0
    for i in range(matrix.shape[0]):
        for j in range(matrix.shape[1]):
            ax.text(j, i, int(matrix[i, j]), ha="center", va="center", fontsize=8,
                    color="white" if matrix[i, j] > high else "black")
    fig.colorbar(im, ax=ax)
    trained = f"model trained on {device}" if device else ""
    fig.suptitle(title_for("Confusion matrix", trained, data), fontsize=12)
    _label_synthetic(fig, synthetic, FOOTER)
    _save(fig, path)
    return fig


def benchmark(source: Union[str, Mapping[str, Mapping[str, Any]]], path: Optional[str] = None,
              metric: str = "mean_speed", device: str = "", data: str = "", synthetic: bool = False):
    """Bar chart of images/s (with its uncertainty) per framework/mode from a bench CSV, or per
    label from a mapping {label: {metric: ..., 'speed_uncertainty': ...}} (notebook 02's results)."""
    if isinstance(source, str):
        with open(source, newline="") as f:
            rows = list(csv.DictReader(f))
        labels = [f"{r.get('framework', r.get('device', '?'))}\n{r.get('mode', '')}" for r in rows]
    else:
        rows = list(source.values())
        labels = list(source)
    vals = [float(r[metric]) for r in rows]
    errs = [float(r.get("speed_uncertainty") or 0) for r in rows]
    fig, bottom, top = _plain_figure(max(6, len(rows)), 4, synthetic)
    ax = fig.add_subplot(1, 1, 1)
    fig.subplots_adjust(bottom=bottom + 0.05, top=top, left=0.15, right=0.97)
    ax.bar(range(len(rows)), vals, yerr=errs, capsize=4)
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels)
    ax.set_ylabel("images / s")
    ax.grid(True, axis="y")
    fig.suptitle(title_for("Training speed", device, data), fontsize=12)
    _label_synthetic(fig, synthetic, FOOTER)
    _save(fig, path)
    return fig
