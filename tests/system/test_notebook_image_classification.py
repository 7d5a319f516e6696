"""notebooks/04_image_classification.ipynb, TensorFlow's "Image classification" tutorial with only its
imports changed, run headless as `hpcnn notebook run 04` runs it, in a quick setting: on the generated
folder of five classes of photos it learns (validation accuracy far above chance), the Rescaling
map gives [0, 1], and the prediction on the new photo is printed. Needs the `jupyter` extra and
scikit-image (the test extra); skipped with the reason otherwise (CI has both)."""
import os
import re
import subprocess
import sys

import pytest

if os.environ.get("HPCNN_EXPECT_JUPYTER") != "1":
    pytest.importorskip("nbclient", reason='the notebook tests need `pip install --no-build-isolation ".[jupyter]"`')
    pytest.importorskip("ipykernel", reason='the notebook tests need `pip install --no-build-isolation ".[jupyter]"`')
pytest.importorskip("skimage", reason="the notebook makes its photos from scikit-image's (the test extra)")
nbformat = pytest.importorskip("nbformat")

QUICK = ["-p", "images_per_class=30", "-p", "first_epochs=8", "-p", "second_epochs=2", "-p", "img_height=64",
         "-p", "img_width=64", "-p", "batch_size=16"]


def outputs(nb, start):
    cells = [c for c in nb.cells if c.cell_type == "code" and c.source.startswith(start)]
    assert cells, start
    text = []
    for c in cells:
        for o in c.outputs:
            text.append(o.get("text") or o.get("data", {}).get("text/plain", ""))
    return "\n".join(text)


def test_image_classification_notebook_runs_and_learns(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", HPCNN_DATA_DIR=str(tmp_path / "data"))
    r = subprocess.run([sys.executable, "-m", "hpcnn", "notebook", "run", "04", *QUICK, "--out", str(tmp_path / "out")],
                       capture_output=True, text=True, env=env, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    nb = nbformat.read(str(tmp_path / "out" / "04_image_classification.ipynb"), as_version=4)
    assert not [o for c in nb.cells if c.cell_type == "code" for o in c.outputs if o.output_type == "error"]
    assert "['astronaut', 'cat', 'coffee', 'motorcycle', 'rocket']" in outputs(nb, "class_names = ")
    assert "Found 150 files belonging to 5 classes." in outputs(nb, "train_ds = tf.keras.utils")
    assert "Using 30 files for validation." in outputs(nb, "val_ds = tf.keras.utils")
    low, high = map(float, outputs(nb, "normalized_ds = ").split()[:2])
    assert 0.0 <= low < high <= 1.0  # Rescaling(1./255) in .map, applied to the batch
    accuracies = [float(a) for a in re.findall(r"val_accuracy: ([0-9.]+)", outputs(nb, "epochs = first_epochs"))]
    assert len(accuracies) == 8 and max(accuracies[-3:]) >= 0.6, accuracies  # chance: 0.2
    assert re.search(r"This image most likely belongs to \w+ with a [0-9.]+ percent confidence",
                     outputs(nb, "img = tf.keras.utils.load_img"))
    assert (tmp_path / "out" / "photos" / ".hpcnn_cache").is_dir()  # decoded once, beside the photos


def test_only_imports_and_two_tf_names_differ_from_the_tutorial():
    """`import hpcnn as tf` keeps the tutorial's tf.keras and tf.data.AUTOTUNE lines; tf.expand_dims and
    tf.nn.softmax (TensorFlow outside Keras) become NumPy's and Keras' (docs/keras.md lists them)."""
    from tests.support import paths
    nb = nbformat.read(str(paths.ROOT / "notebooks" / "04_image_classification.ipynb"), as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    assert "import hpcnn as tf" in code and "tf.keras.utils.image_dataset_from_directory(" in code
    assert "AUTOTUNE = tf.data.AUTOTUNE" in code and "tf.keras.utils.load_img(" in code
    assert "np.expand_dims(img_array, 0)" in code and "keras.activations.softmax(predictions[0])" in code
    assert not re.search(r"^[^#]*\btf\.(nn|expand_dims|image|io)\b", code, re.M)
    assert nb.metadata["kernelspec"]["name"] == "hpcnn" and all(c.get("id") for c in nb.cells)
