"""A folder of photos through hpcnn and through TensorFlow 2.21's Keras, side by side (issue 37).

    python -m bench.bench_images --tf-python /path/to/tf/venv/bin/python [--files 600] [--rounds 2]

Makes a folder of --files JPEG photos of 500x375 (crops, flips and colour shifts of scikit-image's
sample photographs, five classes; no download), then in one interleaved run:

1. conversion: ``hpcnn convert images DIR OUT --size 180 180`` on the job's CPUs (files/s);
2. the pipeline alone, 180x180, batch 32: the first epoch (hpcnn: list, decode, resize, write the
   decoded file, then read it; TensorFlow: ``image_dataset_from_directory(...).cache()``'s first
   pass) and a later epoch (hpcnn: the native loader from its file; TensorFlow: from .cache());
   images/s, each side in its own process, the sides alternating;
3. with --train: the same with the tutorial's first model trained (``fit``, one epoch each);
4. with --arrays: in this process, one epoch of that model on the image dataset against the same
   images as NumPy arrays (what the pipeline adds to training), alternating, --rounds times;
5. with --agreement: that model trained 3 epochs on hpcnn's images, then predicting every photo as
   hpcnn decodes it and as Keras on TensorFlow decodes it: the pixel difference and how often the
   predicted class agrees.

Prints one line per measurement and the ratios; RESULTS.md has the figures."""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

HPCNN_SIDE = r'''
import json, sys, time, os
import numpy as np
args = json.loads(sys.argv[1])
import hpcnn
from hpcnn.data import image_dataset_from_directory
from hpcnn.keras import layers
t0 = time.perf_counter()
ds = image_dataset_from_directory(args["dir"], image_size=(180, 180), batch_size=32, seed=1, verbose=False,
                                  cache_dir=args["cache"])
out = {}
def epoch():
    n = 0
    for x, y in ds:
        n += len(x)
    return n
if args["train"]:
    m = hpcnn.Sequential([layers.Input((180, 180, 3)), layers.Rescaling(1. / 255),
        layers.Conv2D(16, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(5)])
    m.compile("adam", hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    m.fit(ds, epochs=1, verbose=0)
    n = ds.num_rows
    out["first"] = n / (time.perf_counter() - t0)
    t1 = time.perf_counter(); m.fit(ds, epochs=1, verbose=0); out["later"] = n / (time.perf_counter() - t1)
else:
    n = epoch()
    out["first"] = n / (time.perf_counter() - t0)
    t1 = time.perf_counter(); epoch(); out["later"] = n / (time.perf_counter() - t1)
print("RESULT " + json.dumps(out))
'''

TF_SIDE = r'''
import json, sys, time, os
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
args = json.loads(sys.argv[1])
import tensorflow as tf
import keras
from keras import layers
t0 = time.perf_counter()
ds = keras.utils.image_dataset_from_directory(args["dir"], image_size=(180, 180), batch_size=32, seed=1,
                                              verbose=False)
n = len(ds.file_paths)
ds = ds.cache().shuffle(1000).prefetch(buffer_size=tf.data.AUTOTUNE)
out = {}
if args["train"]:
    m = keras.Sequential([keras.Input((180, 180, 3)), layers.Rescaling(1. / 255),
        layers.Conv2D(16, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(32, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Conv2D(64, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
        layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(5)])
    m.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    m.fit(ds, epochs=1, verbose=0)
    out["first"] = n / (time.perf_counter() - t0)
    t1 = time.perf_counter(); m.fit(ds, epochs=1, verbose=0); out["later"] = n / (time.perf_counter() - t1)
else:
    for _ in ds: pass
    out["first"] = n / (time.perf_counter() - t0)
    t1 = time.perf_counter()
    for _ in ds: pass
    out["later"] = n / (time.perf_counter() - t1)
print("RESULT " + json.dumps(out))
'''


def make_photos(root: Path, files: int, seed: int = 0) -> Path:
    """`files` JPEG photos of 500x375 in five classes, from scikit-image's photographs."""
    from PIL import Image
    import skimage
    src = Path(skimage.__file__).parent / "data"
    bases = ["astronaut.png", "chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png"]
    rng = np.random.default_rng(seed)
    for c, name in enumerate(bases):
        (root / f"class_{c}").mkdir(parents=True, exist_ok=True)
        base = Image.open(src / name).convert("RGB")
        for i in range(files // len(bases)):
            w, h = base.size
            cw, ch = int(w * rng.uniform(0.6, 1.0)), int(h * rng.uniform(0.6, 1.0))
            x0, y0 = int(rng.integers(0, w - cw + 1)), int(rng.integers(0, h - ch + 1))
            img = base.crop((x0, y0, x0 + cw, y0 + ch)).resize((500, 375))
            if rng.random() < 0.5:
                img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
            a = np.asarray(img, dtype=np.float32) * rng.uniform(0.8, 1.2, 3)
            Image.fromarray(np.clip(a, 0, 255).astype(np.uint8)).save(root / f"class_{c}" / f"{i:05d}.jpg", quality=90)
    return root


def arrays_against_dataset(photos: Path, cache: Path, rounds: int) -> None:
    """fit one epoch on the image dataset and on its images as arrays, alternating (--arrays)."""
    import hpcnn
    from hpcnn.data import image_dataset_from_directory
    from hpcnn.keras import layers
    ds = image_dataset_from_directory(str(photos), image_size=(180, 180), batch_size=32, seed=1, verbose=False,
                                      cache_dir=str(cache))
    x = np.concatenate([b for b, _ in ds])
    y = np.concatenate([lab for _, lab in ds])

    def model():
        m = hpcnn.Sequential([layers.Input((180, 180, 3)), layers.Rescaling(1. / 255),
                              layers.Conv2D(16, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
                              layers.Conv2D(32, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
                              layers.Conv2D(64, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
                              layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(5)])
        m.compile("adam", hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        return m
    on_arrays, on_dataset = model(), model()
    on_arrays.fit(x[:64], y[:64], batch_size=32, epochs=1, verbose=0)  # warm-up
    on_dataset.fit(ds.take(2), epochs=1, verbose=0)
    for r in range(rounds):
        t = time.perf_counter()
        on_arrays.fit(x, y, batch_size=32, epochs=1, verbose=0)
        a = len(x) / (time.perf_counter() - t)
        t = time.perf_counter()
        on_dataset.fit(ds, epochs=1, verbose=0)
        d = len(x) / (time.perf_counter() - t)
        print(f"round {r}: fit one epoch, 180x180 tutorial model: arrays {a:.0f} img/s, image dataset {d:.0f} img/s")


TF_PIXELS = r'''
import json, os, sys
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "3"
import numpy as np, keras
args = json.loads(sys.argv[1])
ds = keras.utils.image_dataset_from_directory(args["dir"], shuffle=False, image_size=(180, 180), batch_size=1000,
                                              verbose=False)
np.save(args["npy"], np.concatenate([b[0].numpy() for b in ds]))
print("RESULT " + json.dumps({"file_paths": ds.file_paths}))
'''


def agreement(photos: Path, work: Path, tf_python: str) -> None:
    """--agreement: one model, the photos as each side decodes them."""
    import hpcnn
    from hpcnn.data import image_dataset_from_directory
    from hpcnn.keras import layers
    reply = run_side(tf_python, TF_PIXELS, {"dir": str(photos), "npy": str(work / "tf.npy")})
    kw = dict(image_size=(180, 180), verbose=False, cache_dir=str(work / "agree"))
    train, val = image_dataset_from_directory(str(photos), batch_size=32, seed=123, validation_split=0.2,
                                              subset="both", **kw)
    m = hpcnn.Sequential([layers.Input((180, 180, 3)), layers.Rescaling(1. / 255),
                          layers.Conv2D(16, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
                          layers.Conv2D(32, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
                          layers.Conv2D(64, 3, padding="same", activation="relu"), layers.MaxPooling2D(),
                          layers.Flatten(), layers.Dense(128, activation="relu"), layers.Dense(5)])
    m.compile("adam", hpcnn.keras.losses.SparseCategoricalCrossentropy(from_logits=True), metrics=["accuracy"])
    h = m.fit(train, validation_data=val, epochs=3, verbose=0)
    every = image_dataset_from_directory(str(photos), batch_size=1000, shuffle=False, **kw)
    assert every.file_paths == reply["file_paths"]
    ours, theirs = np.concatenate([b for b, _ in every]), np.load(work / "tf.npy")
    p1, p2 = m.predict(ours, verbose=0), m.predict(theirs, verbose=0)
    d = np.abs(ours - theirs)
    print(f"val_accuracy {h.history['val_accuracy'][-1]:.3f}; pixels |hpcnn - Keras| mean {d.mean():.3f} max "
          f"{d.max():.2f}; predicted class agrees on {(p1.argmax(1) == p2.argmax(1)).mean() * 100:.1f} % of "
          f"{len(p1)} photos; largest logit difference {np.abs(p1 - p2).max():.3f}")


def run_side(python: str, code: str, args: dict) -> dict:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="", TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    r = subprocess.run([python, "-c", code, json.dumps(args)], capture_output=True, text=True, env=env)
    line = [x for x in r.stdout.splitlines() if x.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        raise SystemExit(f"side failed ({python}):\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return json.loads(line[0][7:])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tf-python", default=os.environ.get("HPCNN_TF_PYTHON"), help="a python with tensorflow")
    ap.add_argument("--files", type=int, default=600)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--train", action="store_true", help="also time fit() of the tutorial's first model")
    ap.add_argument("--dir", default=None, help="use (or make) the photos here")
    ap.add_argument("--arrays", action="store_true", help="only: training on the dataset against on arrays")
    ap.add_argument("--agreement", action="store_true", help="only: predictions on hpcnn's and Keras' pixels")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench_images_"))
    try:
        photos = Path(args.dir) if args.dir else work / "photos"
        if not photos.exists() or not any(photos.iterdir()):
            t = time.perf_counter()
            make_photos(photos, args.files)
            print(f"made {args.files} photos of 500x375 in {time.perf_counter() - t:.1f} s: {photos}")
        if args.agreement:
            agreement(photos, work, args.tf_python)
            return 0
        if args.arrays:
            arrays_against_dataset(photos, work / "cache_arrays", args.rounds)
            return 0
        n = sum(len(f) for _, _, f in os.walk(photos))
        print(f"hpcnn threads/workers: {os.environ.get('HPCNN_NUM_THREADS') or len(os.sched_getaffinity(0))}")
        for r in range(args.rounds):
            out = work / f"convert_{r}.hdf5"
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "hpcnn", "convert", "images", str(photos), str(out), "--size", "180",
                            "180"], check=True, capture_output=True)
            dt = time.perf_counter() - t
            print(f"round {r}: hpcnn convert images: {n / dt:.0f} files/s ({n} files, {dt:.2f} s, process start "
                  "included)")
            for side in ("hpcnn", "tf") if args.tf_python else ("hpcnn",):
                cache = work / f"cache_{r}"
                shutil.rmtree(cache, ignore_errors=True)
                a = {"dir": str(photos), "cache": str(cache), "train": args.train}
                res = run_side(sys.executable, HPCNN_SIDE, a) if side == "hpcnn" else run_side(args.tf_python,
                                                                                               TF_SIDE, a)
                what = "decode+resize+train" if args.train else "decode+resize (pipeline only)"
                print(f"round {r}: {side:5s} {what}: first epoch {res['first']:.0f} img/s, later epoch "
                      f"{res['later']:.0f} img/s")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
