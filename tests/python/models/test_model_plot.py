"""keras.utils.plot_model drawn with matplotlib: the boxes carry Keras' labels (class, name, output
shape...), one per layer or nested model, the file is written whole in the format its name asks
for, a notebook gets an Image, and bad arguments say what is wrong."""
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="plot_model draws with matplotlib (the `jupyter` extra)")

import hpcnn  # noqa: E402
from hpcnn.keras import layers, utils  # noqa: E402


def tutorial_model():
    """The transfer-learning tutorial's shape of model: augmentation, a nested base, a head."""
    augment = hpcnn.keras.Sequential([layers.RandomFlip("horizontal"), layers.RandomRotation(0.2)], name="aug")
    base = hpcnn.keras.Sequential([layers.Input((16, 16, 3)), layers.Conv2D(8, 3, activation="relu")], name="base")
    inputs = hpcnn.Input((16, 16, 3))
    x = base(augment(inputs), training=False)
    x = layers.GlobalAveragePooling2D(name="pool")(x)
    return hpcnn.Model(inputs, layers.Dense(1, activation="sigmoid", name="head")(x), name="tutorial")


def svg_text(model, path, **kw):
    with matplotlib.rc_context({"svg.fonttype": "none"}):   # the labels as text, to read them back
        assert utils.plot_model(model, to_file=str(path), **kw) is None   # no Image for an SVG
    return path.read_text()


def test_the_boxes_say_what_keras_shows(tmp_path):
    model = tutorial_model()
    svg = svg_text(model, tmp_path / "m.svg", show_shapes=True)
    for label in ("InputLayer", "Sequential", "GlobalAveragePooling2D", "Dense", "Output shape: (None, 16, 16, 3)",
                  "Output shape: (None, 14, 14, 8)", "Output shape: (None, 8)", "Output shape: (None, 1)"):
        assert label in svg, label
    assert "Conv2D" not in svg and "pool (" not in svg   # the nested model one box; Keras 3: no names by default
    svg = svg_text(model, tmp_path / "n.svg", show_layer_names=True, expand_nested=True, show_trainable=True,
                   show_layer_activations=True, show_dtype=True)
    for label in ("pool (GlobalAveragePooling2D)", "head (Dense)", "Conv2D", "RandomRotation", "Activation: sigmoid",
                  "Trainable: yes", "Output dtype: float32"):
        assert label in svg, label
    assert "Output shape" not in svg


def test_a_png_written_whole_and_shown_in_a_notebook(tmp_path):
    pytest.importorskip("IPython", reason="the returned picture is IPython's Image")
    inputs = hpcnn.Input((8, 8, 3))
    a = layers.Conv2D(3, 3, padding="same")(inputs)
    model = hpcnn.Model(inputs, layers.Flatten()(layers.Add()([a, layers.Conv2D(3, 3, padding="same")(a)])))
    image = utils.plot_model(model, to_file=str(tmp_path / "res.png"), show_shapes=True, dpi=50)
    data = (tmp_path / "res.png").read_bytes()
    assert data.startswith(b"\x89PNG") and image.data == data
    utils.plot_model(model, to_file=str(tmp_path / "res_lr.png"), rankdir="LR", dpi=50)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["res.png", "res_lr.png"]   # no partial files left
    assert (tmp_path / "res.pdf").exists() is False
    utils.plot_model(model, to_file=str(tmp_path / "res.pdf"))
    assert (tmp_path / "res.pdf").read_bytes().startswith(b"%PDF")


@pytest.mark.parametrize("call, exc, message", [
    (lambda m, d: utils.plot_model(m, str(d / "x.png"), rankdir="BT"), ValueError, r"rankdir must be one of \('TB', 'LR'\)"),
    (lambda m, d: utils.plot_model(m, str(d / "x.gif")), ValueError, r"extension must be .png, .svg, .pdf or .jpg"),
    (lambda m, d: utils.plot_model(m, str(d / "x.png"), show_layer_range=["a", "b"]), TypeError, "show_layer_range"),
    (lambda m, d: utils.plot_model("model", str(d / "x.png")), TypeError, "expected an hpcnn model, got str"),
    (lambda m, d: utils.plot_model(hpcnn.keras.Sequential([layers.Dense(2)]), str(d / "x.png")), ValueError,
     "is not built"),
    (lambda m, d: utils.plot_model(m, str(d / "missing" / "x.png")), FileNotFoundError, "missing"),
])
def test_bad_arguments_say_what_is_wrong(tmp_path, call, exc, message):
    with pytest.raises(exc, match=message):
        call(tutorial_model(), tmp_path)
    assert not list(tmp_path.rglob("*.png"))   # nothing half-written
