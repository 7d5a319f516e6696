"""Small folders of images for the image_dataset_from_directory tests (made with Pillow in a tmp
dir), and the TensorFlow interpreter the live comparisons run Keras' own function in."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Optional

import numpy as np
import pytest

from tests.support import paths

PIL = pytest.importorskip("PIL.Image", reason="the image tests need Pillow (pip install --no-build-isolation '.[images]')")
TF_REASON = ("the live comparison with Keras' own image_dataset_from_directory needs TensorFlow: set HPCNN_TF_PYTHON "
             "to a python that imports tensorflow (or install tensorflow-cpu here)")


def make_folder(root: Path, classes: Dict[str, int], size=(24, 32), seed: int = 0) -> Path:
    """root/<class>/<i>.<ext>: `classes[c]` images each, random pixels, PNG and JPEG alternating
    (one .JPG upper case), a hidden class folder and a non-image file that must not be listed."""
    rng = np.random.default_rng(seed)
    for c, n in classes.items():
        (root / c).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            h, w = size[0] + i % 3, size[1] + (i * 7) % 5
            img = PIL.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
            ext = ["png", "jpg", "JPG", "bmp"][i % 4]
            img.save(root / c / f"img_{i:03d}.{ext}", format={"jpg": "JPEG", "JPG": "JPEG"}.get(ext, ext.upper()))
        (root / c / "notes.txt").write_text("not an image")
    (root / ".hidden_class").mkdir(exist_ok=True)
    PIL.fromarray(np.zeros((8, 8, 3), np.uint8)).save(root / ".hidden_class" / "x.png")
    return root


def skimage_photos() -> Optional[Path]:
    """scikit-image's folder of sample photographs (astronaut.png, chelsea.png, ...), or None."""
    try:
        import skimage
    except ImportError:
        return None
    d = Path(skimage.__file__).parent / "data"
    return d if (d / "astronaut.png").exists() else None


def photo_folder(root: Path, gif: bool = True) -> Path:
    """A folder of real photographs (scikit-image's), PNG and JPEG (and a GIF), in three classes;
    skips without them. (TensorFlow refuses a GIF for color_mode='grayscale': gif=False.)"""
    src = skimage_photos()
    if src is None:
        pytest.skip("needs scikit-image's sample photographs (pip install scikit-image: the test extra)")
    groups = {"a": ["astronaut.png", "chelsea.png", "rocket.jpg"], "b": ["coffee.png", "retina.jpg", "camera.png"],
              "c": ["motorcycle_left.png", "hubble_deep_field.jpg", "no_time_for_that_tiny.gif"]}
    for c, names in groups.items():
        (root / c).mkdir(parents=True, exist_ok=True)
        for n in names:
            if n.endswith(".gif") and not gif:
                continue
            shutil.copy(src / n, root / c / n)
        PIL.open(src / names[0]).convert("RGB").save(root / c / f"q90_{names[0]}.jpg", quality=90)
    return root


def tf_python() -> Optional[str]:
    """A python that imports tensorflow: $HPCNN_TF_PYTHON, or this one when it does."""
    env = os.environ.get("HPCNN_TF_PYTHON")
    if env:
        return env
    try:
        import importlib.util
        if importlib.util.find_spec("tensorflow") is not None:
            return sys.executable
    except (ImportError, ValueError):
        pass
    return None


def run_keras(script: str, args: dict, tmp: Path) -> dict:
    """Runs tests/support/keras_images_side.py `script` in TensorFlow's python; its JSON reply."""
    py = tf_python()
    if py is None:
        pytest.skip(TF_REASON)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow", CUDA_VISIBLE_DEVICES="")
    env.pop("PYTHONPATH", None)
    out = tmp / "keras_reply.json"
    cmd = [py, str(paths.ROOT / "tests" / "support" / "keras_images_side.py"), script, json.dumps(args), str(out)]
    r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"Keras' side failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}"
    return json.loads(out.read_text())
