"""notebooks/05_transfer_learning.ipynb, TensorFlow's "Transfer learning and fine-tuning" tutorial with
only its imports changed, run headless as `hpcnn notebook run 05` runs it, in a quick setting.

Nothing is downloaded in CI, so the test puts a stand-in for Keras' ImageNet file where Keras keeps
it (`$KERAS_HOME/models`, the file name Keras downloads): MobileNetV2 trained for a few epochs on the
notebook's own photos by hpcnn, saved in the download file's layout (a random base's features carry
nothing to freeze: the tutorial's two phases would stay at chance). The notebook then runs the
tutorial: the frozen base under a new head, fine-tuning from layer 100, and the test set; its
accuracy after fine-tuning beats chance (0.5) clearly, the curves and the photo grids are drawn.
A second run without the file and without internet takes the notebook's `weights=None` path
with its note. Needs the `jupyter` extra and scikit-image (the test extra); skipped with the
reason otherwise (CI has both)."""
import os
import re
import subprocess
import sys

import numpy as np
import pytest

if os.environ.get("HPCNN_EXPECT_JUPYTER") != "1":
    pytest.importorskip("nbclient", reason='the notebook tests need `pip install --no-build-isolation ".[jupyter]"`')
    pytest.importorskip("ipykernel", reason='the notebook tests need `pip install --no-build-isolation ".[jupyter]"`')
pytest.importorskip("skimage", reason="the notebook makes its photos from scikit-image's (the test extra)")
nbformat = pytest.importorskip("nbformat")

import hpcnn  # noqa: E402
from hpcnn.keras import applications  # noqa: E402

SIZE = 64   # not one of MobileNetV2's weight sizes: Keras (and hpcnn) load the 224x224 file's weights
WEIGHTS = "mobilenet_v2_weights_tf_dim_ordering_tf_kernels_1.0_224_no_top.h5"
QUICK = ["-p", "images_per_class=50", "-p", "BATCH_SIZE=10", "-p", f"IMG_SIZE=({SIZE}, {SIZE})",
         "-p", "initial_epochs=3", "-p", "fine_tune_epochs=3"]


def outputs(nb, start):
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(start)]
    assert cells, start
    text = []
    for c in cells:
        for o in c.outputs:
            text.append(o.get("text") or o.get("data", {}).get("text/plain", ""))
    return "\n".join(text)


def run_notebook(workdir, env):
    r = subprocess.run([sys.executable, "-m", "hpcnn", "notebook", "run", "05", *QUICK, "--out", str(workdir)],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    nb = nbformat.read(str(workdir / "05_transfer_learning.ipynb"), as_version=4)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    return nb


def stand_in_weights(photos, path):
    """MobileNetV2 (no top) trained on the photos' training folder, saved where Keras' file goes.
    BatchNormalization's momentum is 0.9 instead of 0.999 for the training, so that the moving
    statistics (what the frozen base normalizes with) settle within these few steps, and a few forward
    passes in training mode after the last step let them catch up with its weights."""
    ds = hpcnn.keras.utils.image_dataset_from_directory(photos / "train", image_size=(SIZE, SIZE), batch_size=20,
                                                         shuffle=False, verbose=False)
    x = np.concatenate([b for b, _ in ds])
    y = np.concatenate([l for _, l in ds])
    x = applications.mobilenet_v2.preprocess_input(x.astype(np.float32))
    hpcnn.utils.set_random_seed(0)
    base = applications.MobileNetV2(input_shape=(SIZE, SIZE, 3), include_top=False, weights=None)
    config = base.get_config()
    for layer in config["layers"]:
        if layer["class_name"] == "BatchNormalization":
            layer["config"]["momentum"] = 0.9
    twin = hpcnn.Model.from_config(config)
    inputs = hpcnn.Input(shape=(SIZE, SIZE, 3))
    model = hpcnn.Model(inputs, hpcnn.layers.Dense(2)(hpcnn.layers.GlobalAveragePooling2D()(twin(inputs))))
    model.compile(optimizer=hpcnn.optimizers.Adam(2e-3),
                  loss=hpcnn.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, batch_size=20, epochs=6, verbose=0)
    for i in range(40):   # forward passes in training mode: the moving statistics catch up with the last weights
        model(x[(i % 5) * 20:(i % 5) * 20 + 20], training=True)
    base.set_weights(twin.get_weights())
    base.save_weights(str(path))


def test_transfer_learning_notebook_runs_and_fine_tunes(tmp_path):
    # First run without the ImageNet file (and no internet: a URL that cannot answer): the
    # notebook's note and weights=None; its photos are then reused for the stand-in file.
    no_file = dict(os.environ, MPLBACKEND="Agg", KERAS_HOME=str(tmp_path / "empty_keras"),
                   HPCNN_KERAS_WEIGHTS_URL=(tmp_path / "nowhere").as_uri())
    nb = run_notebook(tmp_path / "out", no_file)
    assert "Note: the ImageNet weights are not available" in outputs(nb, "# Create the base model")
    assert "Found 100 files belonging to 2 classes." in outputs(nb, "train_dir = ")
    assert "Number of validation batches: 4\nNumber of test batches: 1" in outputs(nb, "print('Number of validation")
    assert outputs(nb, "image_batch, label_batch = next(").strip() == "(10, 2, 2, 1280)"
    assert outputs(nb, "global_average_layer = ").strip() == "(10, 1280)"
    assert outputs(nb, "prediction_layer = ").strip() == "(10, 1)"
    assert outputs(nb, "len(model.trainable_variables)").split() == ["2", "56"]   # the head; + 100 layers on
    assert "Number of layers in the base model:  154" in outputs(nb, "# Let's take a look to see how many")
    pngs = [c for c in nb.cells if c.cell_type == "code" for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(pngs) == 6, len(pngs)   # two photo grids, plot_model's picture, two sets of curves, the predictions
    assert (tmp_path / "out" / "model.png").read_bytes().startswith(b"\x89PNG")   # plot_model's file, as Keras writes it

    keras_home = tmp_path / "keras"
    (keras_home / "models").mkdir(parents=True)
    stand_in_weights(tmp_path / "out" / "cats_and_dogs_filtered", keras_home / "models" / WEIGHTS)
    env = dict(no_file, KERAS_HOME=str(keras_home))
    nb = run_notebook(tmp_path / "out", env)   # the same photos (the folder exists), now with the file
    assert "Note:" not in outputs(nb, "# Create the base model")
    fine = [float(a) for a in re.findall(r"val_accuracy: ([0-9.]+)", outputs(nb, "total_epochs ="))]
    print("validation accuracy while fine-tuning:", fine)
    assert len(fine) == 3 and max(fine[-2:]) >= 0.75, fine   # chance: 0.5 (0.75 of 40 photos: p < 0.001)
    loss0 = float(outputs(nb, 'print("initial loss').split()[2])
    fine_losses = [float(v) for v in re.findall(r"val_loss: ([0-9.]+)", outputs(nb, "total_epochs ="))]
    assert fine_losses[-1] < loss0, (loss0, fine_losses)
    float(outputs(nb, "loss, accuracy = model.evaluate(test_dataset)").split("Test accuracy :")[1])
    predictions = outputs(nb, "# Retrieve a batch of images")
    assert re.search(r"Predictions:\n \[[01 ]+\]\nLabels:\n \[[01 ]+\]", predictions), predictions


def test_only_imports_and_two_tf_names_differ_from_the_tutorial():
    """`import hpcnn as tf` keeps the tutorial's tf.keras, tf.data.AUTOTUNE and
    tf.data.experimental.cardinality lines; tf.expand_dims and tf.where (TensorFlow outside Keras)
    become NumPy's (docs/keras.md lists them); plot_model runs as written."""
    from tests.support import paths
    nb = nbformat.read(str(paths.ROOT / "notebooks" / "05_transfer_learning.ipynb"), as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "import hpcnn as tf" in code and "tf.keras.applications.MobileNetV2(input_shape=IMG_SHAPE," in code
    assert "val_batches = tf.data.experimental.cardinality(validation_dataset)" in code
    assert "AUTOTUNE = tf.data.AUTOTUNE" in code and "feature_batch = base_model(image_batch)" in code
    assert "np.expand_dims(first_image, 0)" in code and "np.where(predictions < 0.5, 0, 1)" in code
    assert not re.search(r"^[^#]*\btf\.(nn|expand_dims|where|image|io)\b", code, re.M)
    assert "tf.keras.utils.plot_model(model, show_shapes=True)" in code
    assert nb.metadata["kernelspec"]["name"] == "hpcnn" and all(c.get("id") for c in nb.cells)
