#!/usr/bin/env python3
"""Training and inference speed of TensorFlow's "Image classification" tutorial model at 180x180
(Rescaling 1/255, Conv 16/32/64 3x3 'same' + ReLU each followed by MaxPooling2D, Flatten, Dense
128 ReLU, Dense 5 logits; Adam) on the CPU, batch 32 as the tutorial: hpcnn vs PyTorch vs
TensorFlow/Keras, side by side in one run (bench/bench_train.py's harness: each framework in its
own process, the processes taking turns step by step). --model photos_aug times the tutorial's
second model (RandomFlip, RandomRotation 0.1, RandomZoom 0.1 in the model, Dropout 0.2 before
Flatten); PyTorch has no augmentation layers, so its worker draws the same transforms per image
with torchvision, as a DataLoader's transform would.

    python bench/bench_photos.py --python /path/to/bench-venv/bin/python --threads 2
    python bench/bench_photos.py --model photos_aug --python PEERS --baseline-python main=OLD_VENV/bin/python

Random data (speed does not depend on pixel values). The options are bench_train.py's. The models
are bench/photos_sessions.py's.
"""
from __future__ import annotations

import os
import sys

if __package__:  # python -m bench.bench_photos
    from bench import bench_train
else:  # python bench/bench_photos.py: its folder is first on sys.path
    import bench_train

# The models, in each framework, for the workers (hpcnn.bench_workers.add_sessions)
SESSIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "photos_sessions.py")

if __name__ == "__main__":
    sys.exit(bench_train.main(doc=__doc__, model="photos", batch=32, sessions=SESSIONS))
