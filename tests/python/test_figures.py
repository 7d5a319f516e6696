"""The lessons' figures (hpcnn.plot), rendered with Agg and checked from their geometry: thumbnails
without ticks and without empty bands between or around their rows; wrong predictions marked and
right ones not; the device and the data in the title; "synthetic data" written on the figure
(inside it, as figure-level text) when the data are synthetic, and nowhere when they are not."""
import os

import numpy as np
import pytest

if os.environ.get("HPCNN_EXPECT_JUPYTER") == "1":
    import matplotlib  # CI installs the `jupyter` extra: a missing matplotlib is an error, not a skip
else:
    matplotlib = pytest.importorskip("matplotlib", reason='the figures need matplotlib (`pip install --no-build-isolation ".[plot]"`)')
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (after the backend is chosen)
import matplotlib.text  # noqa: E402

from hpcnn import plot  # noqa: E402

CLASSES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


@pytest.fixture(autouse=True)
def close_figures():
    yield
    plt.close("all")


def images(n, shape=(32, 32, 3), seed=0):
    return np.random.default_rng(seed).integers(0, 256, (n,) + shape).astype(np.uint8)


def drawn(fig):
    fig.canvas.draw()
    return fig


def thumbnails(fig):
    """The axes that show an image, with their boxes in inches (after drawing)."""
    dpi = fig.dpi
    out = []
    for ax in fig.axes:
        if ax.images:
            b = ax.get_window_extent()
            out.append((ax, (b.x0 / dpi, b.y0 / dpi, b.x1 / dpi, b.y1 / dpi)))
    return out


def check_grid(fig, count):
    """count thumbnails without ticks, in rows whose gaps, and the bands above the top row and
    below the bottom one, are no higher than a thumbnail."""
    thumbs = thumbnails(drawn(fig))
    assert len(thumbs) == count
    for ax, _ in thumbs:
        assert len(ax.get_xticks()) == 0 and len(ax.get_yticks()) == 0, "ticks on a thumbnail"
    height = max(y1 - y0 for _, (_, y0, _, y1) in thumbs)
    rows = sorted({(round(y0, 3), round(y1, 3)) for _, (_, y0, _, y1) in thumbs}, reverse=True)
    for (low_top_row, _), (_, high_next_row) in zip(rows, rows[1:]):
        assert low_top_row - high_next_row <= height, f"a gap of {low_top_row - high_next_row:.2f} in between rows"
    assert fig.get_figheight() - rows[0][1] <= height, "an empty band above the grid"
    assert rows[-1][0] <= height, "an empty band below the grid"
    width = max(x1 - x0 for _, (x0, _, x1, _) in thumbs)
    right = max(x1 for _, (_, _, x1, _) in thumbs)
    left = min(x0 for _, (x0, _, _, _) in thumbs)
    assert left <= width and fig.get_figwidth() - right <= width, "an empty band beside the grid"
    return rows


def synthetic_labels(fig):
    """The figure-level texts that say 'synthetic data', each checked to lie inside the figure."""
    drawn(fig)
    box = fig.bbox
    found = []
    for t in fig.texts:
        if "synthetic data" in t.get_text():
            e = t.get_window_extent()
            assert box.x0 <= e.x0 and e.x1 <= box.x1 and box.y0 <= e.y0 and e.y1 <= box.y1, "label cut off"
            found.append(t)
    return found


def mentions_synthetic(fig):
    texts = [t.get_text() for t in fig.texts] + [fig.get_suptitle()]
    texts += [ax.get_title(loc) for ax in fig.axes for loc in ("left", "center", "right")]
    return any("synthetic" in t.lower() for t in texts)


@pytest.mark.parametrize("synthetic", [True, False])
def test_sample_grid(synthetic):
    fig = plot.samples(images(20), np.arange(20) % 10, CLASSES, data="CIFAR-10", synthetic=synthetic)
    rows = check_grid(fig, 14)
    assert len(rows) == 2
    assert "CIFAR-10" in fig.get_suptitle()
    assert [ax.get_title() for ax, _ in thumbnails(fig)][:3] == ["airplane", "automobile", "bird"]
    assert len(synthetic_labels(fig)) == (1 if synthetic else 0)
    assert mentions_synthetic(fig) == synthetic


@pytest.mark.parametrize("synthetic", [True, False])
def test_prediction_grid_marks_the_wrong_ones(synthetic):
    y_true = np.arange(20) % 10
    y_pred = y_true.copy()
    y_pred[[1, 7, 12]] = (y_pred[[1, 7, 12]] + 1) % 10
    x = images(20).astype(np.float32) / 255            # floats, as the notebooks pass them too
    fig = plot.predictions(x, y_true.reshape(-1, 1), y_pred, CLASSES, device="GPU", data="CIFAR-10",
                           synthetic=synthetic)
    rows = check_grid(fig, 20)
    assert len(rows) == 4
    title = fig.get_suptitle()
    assert "trained on GPU" in title and "CIFAR-10" in title and "3 of 20" in title
    for i, (ax, _) in enumerate(thumbnails(fig)):
        wrong = i in (1, 7, 12)
        caption = ax.get_title(loc="left")
        assert caption == f"y: {CLASSES[y_true[i]]}\np: {CLASSES[y_pred[i]]}"
        text = [c for c in ax.get_children() if isinstance(c, matplotlib.text.Text) and c.get_text() == caption]
        assert matplotlib.colors.same_color(text[0].get_color(), "red" if wrong else "black"), i
        assert any(s.get_visible() for s in ax.spines.values()) == wrong, i
    assert len(synthetic_labels(fig)) == (1 if synthetic else 0)
    assert mentions_synthetic(fig) == synthetic


def test_grid_with_one_short_row_and_grey_images():
    fig = plot.predictions(images(7, (28, 28, 1)), [0] * 7, [0] * 7, CLASSES, cols=5)
    assert len(check_grid(fig, 7)) == 2


@pytest.mark.parametrize("synthetic", [True, False])
def test_curves(synthetic):
    h = {"loss": [2.3, 2.0, 1.8], "val_loss": [2.2, 2.1, 1.9], "accuracy": [.1, .3, .4], "val_accuracy": [.1, .2, .3]}
    fig = drawn(plot.history(h, label="CPU", compare={"GPU": h, "none": None}, device="CPU and GPU",
                             data="CIFAR-10", synthetic=synthetic))
    assert "CPU and GPU" in fig.get_suptitle() and "CIFAR-10" in fig.get_suptitle()
    loss, acc = fig.axes[:2]
    assert [ax.get_title() for ax in (loss, acc)] == ["Loss", "Accuracy"]
    legend = [t.get_text() for t in loss.get_legend().get_texts()]
    assert legend == ["CPU training", "CPU validation", "GPU training", "GPU validation"]
    assert len(synthetic_labels(fig)) == (1 if synthetic else 0)
    assert mentions_synthetic(fig) == synthetic
    if synthetic:   # the label has a band of its own, below the axes and their tick labels
        label = synthetic_labels(fig)[0].get_window_extent()
        assert all(label.y1 < ax.get_tightbbox().y0 for ax in (loss, acc))


@pytest.mark.parametrize("synthetic", [True, False])
def test_confusion_matrix(synthetic):
    m = np.arange(100).reshape(10, 10)
    fig = drawn(plot.confusion(m, CLASSES, device="CPU", data="CIFAR-10", synthetic=synthetic))
    assert "trained on CPU" in fig.get_suptitle()
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == CLASSES
    assert sorted(int(t.get_text()) for t in ax.texts) == list(range(100))
    assert len(synthetic_labels(fig)) == (1 if synthetic else 0)
    if synthetic:
        label = synthetic_labels(fig)[0].get_window_extent()
        assert label.y1 < ax.get_tightbbox().y0


def test_benchmark_from_results_and_from_csv(tmp_path):
    results = {"cpu": {"mean_speed": 900.0, "speed_uncertainty": 5.0}, "gpu": {"mean_speed": 9000.0}}
    fig = drawn(plot.benchmark(results, device="node1", data="Fashion-MNIST"))
    assert "node1" in fig.get_suptitle() and not synthetic_labels(fig)
    assert [p.get_height() for p in fig.axes[0].patches] == [900.0, 9000.0]
    csv_path = tmp_path / "b.csv"
    csv_path.write_text("framework,mode,mean_speed,speed_uncertainty\nhpcnn,cpu,100,1\n")
    png = tmp_path / "b.png"
    plot.benchmark(str(csv_path), str(png))
    assert png.stat().st_size > 0


def test_saved_png_keeps_the_label(tmp_path):
    """The PNG written with `path` (bbox 'tight') still holds the band with the label: its height
    is the figure's, give or take the tight crop."""
    png = tmp_path / "s.png"
    fig = plot.samples(images(14), np.arange(14) % 10, CLASSES, synthetic=True, path=str(png))
    img = plt.imread(str(png))
    assert abs(img.shape[0] / 110 - fig.get_figheight()) < 0.5


@pytest.mark.parametrize("epochs", [1, 3, 30])
def test_curves_count_whole_epochs(epochs):
    """The epoch axis has whole-number ticks, also for a run of one epoch (matplotlib would
    otherwise label a single point's axis 0.96, 0.98, ...)."""
    h = {"loss": list(np.linspace(2.3, 1.0, epochs)), "accuracy": list(np.linspace(.1, .6, epochs))}
    fig = drawn(plot.history(h, label="CPU"))
    for ax in fig.axes[:2]:
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks), ticks
        assert 1 in ticks or epochs > 10, ticks
