"""``image_dataset_from_directory``'s work: Keras' arguments checked as Keras checks them, the listing
and split (listing.py), the decoded images' file (cache.py), the datasets (dataset.py)."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import time
import warnings
from typing import Any, Callable, List, Optional, Sequence, Tuple, Union

import numpy as np

from .. import paths, progress
from .cache import Subset, build_or_reuse
from .dataset import ImageDataset, UnbatchedDataset
from .decode import Recipe, require_pillow
from .listing import ALLOWLIST_FORMATS, check_validation_split_arg, index_directory, split
from .resize import INTERPOLATIONS

__all__ = ["from_directory", "cache_path", "recipe_of", "progress_bar", "listed_subsets", "KERAS_INTERPOLATIONS"]

#: What Keras accepts for `interpolation`; hpcnn implements INTERPOLATIONS of them.
KERAS_INTERPOLATIONS = ("bilinear", "nearest", "bicubic", "area", "lanczos3", "lanczos5", "gaussian", "mitchellcubic")
CHANNELS = {"rgb": 3, "rgba": 4, "grayscale": 1}


def recipe_of(color_mode: str, image_size: Any, interpolation: str, crop_to_aspect_ratio: bool,
              pad_to_aspect_ratio: bool, where: str) -> Recipe:
    """The Recipe of Keras' arguments, checked with Keras' messages."""
    if color_mode not in CHANNELS:
        raise ValueError(f'`color_mode` must be one of {{"rgb", "rgba", "grayscale"}}. Received: color_mode={color_mode}')
    if isinstance(image_size, int):
        image_size = (image_size, image_size)
    elif not isinstance(image_size, (list, tuple)) or not len(image_size) == 2:
        raise ValueError(f"Invalid `image_size` value. Expected a tuple of 2 integers. Received: image_size={image_size}")
    if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 1 <= v <= 65535 for v in image_size):
        raise ValueError(f"{where}: image_size must be two integers in 1..65535, got {image_size}")
    if not isinstance(interpolation, str):
        raise ValueError(f"Argument `interpolation` should be one of {KERAS_INTERPOLATIONS}. "
                         f"Received: interpolation={interpolation}")
    interpolation = interpolation.lower()
    if interpolation not in KERAS_INTERPOLATIONS:
        raise ValueError(f"Argument `interpolation` should be one of {KERAS_INTERPOLATIONS}. "
                         f"Received: interpolation={interpolation}")
    if interpolation not in INTERPOLATIONS:
        raise NotImplementedError(f"{where}: interpolation='{interpolation}' is not implemented in hpcnn; the "
                                  f"supported ones are {', '.join(repr(i) for i in INTERPOLATIONS)} "
                                  "(TensorFlow's, no antialiasing)")
    if pad_to_aspect_ratio and crop_to_aspect_ratio:
        raise ValueError("Only one of `pad_to_aspect_ratio`, `crop_to_aspect_ratio` can be set to `True`.")
    aspect = "crop" if crop_to_aspect_ratio else ("pad" if pad_to_aspect_ratio else None)
    return Recipe(tuple(int(v) for v in image_size), CHANNELS[color_mode], interpolation, aspect)


def cache_path(directory: str, recipe: Recipe, labels_key: str, split_key: str, cache_dir: Optional[str]) -> str:
    """Where a folder's decoded images go: `cache_dir`, else <folder>/.hpcnn_cache when it can be
    written, else <data directory>/image_cache; the name keyed by the folder and the arguments."""
    what = json.dumps([os.path.abspath(directory), list(recipe.size), recipe.channels, recipe.interpolation,
                       recipe.aspect, labels_key, split_key])
    name = f"{os.path.basename(os.path.abspath(directory)) or 'images'}-{hashlib.sha256(what.encode()).hexdigest()[:16]}.hdf5"
    if cache_dir is None:
        beside = os.path.join(directory, ".hpcnn_cache")
        if os.access(directory, os.W_OK) or os.path.isdir(beside) and os.access(beside, os.W_OK):
            cache_dir = beside
        else:
            cache_dir = os.path.join(paths.data_dir(), "image_cache")
    os.makedirs(cache_dir, exist_ok=True)
    return os.path.join(cache_dir, name)


def progress_bar(verbose: bool, title: str = "") -> Optional[Callable[[int], Callable[[int], None]]]:
    """A factory of progress callbacks for cache.write_images: a bar over the files (with the
    images per second at the end); None when not verbose."""
    if not verbose:
        return None

    def factory(total: int) -> Callable[[int], None]:
        if title:
            print(title.format(total=total))
        bar = progress.ProgressBar(total, 1)

        def update(done: int) -> None:
            if done >= total:
                bar.finish({}, images_per_second=total / max(time.perf_counter() - bar.start, 1e-9))
            else:
                bar.update(done, {})
        return update
    return factory


def _warn_refused(refused: List[List[str]], where: str) -> None:
    if not refused:
        return
    shown = "\n  ".join(f"{p}: {r}" for p, r in refused[:10])
    more = f"\n  ... and {len(refused) - 10} more (the dataset's refused_files lists all)" if len(refused) > 10 else ""
    warnings.warn(f"{where}: {len(refused)} file(s) left out, they are not usable images (move or repair "
                  f"them):\n  {shown}{more}", UserWarning, stacklevel=4)


def listed_subsets(listing: Any, validation_split: Optional[float]) -> List[Subset]:
    """The 'train' subset, and the 'valid' one with a validation_split (Keras' split, silently)."""
    if not validation_split:
        return [Subset("train", listing.file_paths, listing.labels)]
    with open(os.devnull, "w") as quiet:  # Keras prints only the subsets it returns
        stdout, sys.stdout = sys.stdout, quiet
        try:
            train = split(listing, validation_split, "training")
            valid = split(listing, validation_split, "validation")
        finally:
            sys.stdout = stdout
    return [Subset("train", *train), Subset("valid", *valid)]


def from_directory(open_rows: Callable[..., Any], directory: Any, labels: Any = "inferred", label_mode: Optional[str] = "int",
                   class_names: Optional[Sequence[str]] = None, color_mode: str = "rgb", batch_size: Optional[int] = 32,
                   image_size: Any = (256, 256), shuffle: bool = True, seed: Optional[int] = None,
                   validation_split: Optional[float] = None, subset: Optional[str] = None,
                   interpolation: str = "bilinear", follow_links: bool = False, crop_to_aspect_ratio: bool = False,
                   pad_to_aspect_ratio: bool = False, data_format: Optional[str] = None, format: str = "tf",
                   verbose: bool = True, cache_dir: Optional[str] = None) -> Union[Any, List[Any]]:
    """See ``hpcnn.data.image_dataset_from_directory``. `open_rows(path, x, y, **loader args)` opens
    the native dataset of an images file's rows."""
    where = "image_dataset_from_directory"
    directory = os.fspath(directory)
    if labels not in ("inferred", None):
        if not isinstance(labels, (list, tuple, np.ndarray)):
            raise ValueError("`labels` argument should be a list/tuple of integer labels, of the same size as the "
                             "number of image files in the target directory. If you wish to infer the labels from "
                             'the subdirectory names in the target directory, pass `labels="inferred"`. If you wish '
                             f"to get a dataset that only contains images (no labels), pass `labels=None`. Received: "
                             f"labels={labels}")
        if class_names:
            raise ValueError(f'You can only pass `class_names` if `labels="inferred"`. Received: labels={labels}, and '
                             f"class_names={class_names}")
        if not all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) and 0 <= v < 2**31 for v in labels):
            raise ValueError(f"{where}: labels must be integers in [0, 2**31) (class indices), one per file")
    if label_mode not in {"int", "categorical", "binary", None}:
        raise ValueError('`label_mode` argument must be one of "int", "categorical", "binary", or None. Received: '
                         f"label_mode={label_mode}")
    if labels is None or label_mode is None:
        labels, label_mode = None, None
    recipe = recipe_of(color_mode, image_size, interpolation, crop_to_aspect_ratio, pad_to_aspect_ratio, where)
    if data_format not in (None, "channels_last"):
        raise NotImplementedError(f"{where}: data_format={data_format!r}: hpcnn's images are channels_last "
                                  "(height, width, channels)")
    if format not in ("tf", "grain"):
        raise ValueError(f'`format` should be either "tf" or "grain". Received: format={format}')
    if batch_size is not None and (not isinstance(batch_size, (int, np.integer)) or isinstance(batch_size, bool)
                                   or batch_size < 1):
        raise ValueError(f"{where}: batch_size must be an integer >= 1 or None, got {batch_size!r}")
    check_validation_split_arg(validation_split, subset, shuffle, seed)
    require_pillow(where)
    if seed is None:
        seed = np.random.randint(1e6)  # as Keras draws it (the global NumPy generator)
    # Without a split, the rows are stored in the listing's sorted order, whatever the seed: the
    # loader shuffles them every epoch, so one decoded file serves every seed (a run with seed=None
    # draws a new one each time, and BackupAndRestore resumes it bitwise). file_paths is Keras'
    # shuffled list all the same. With a split the seed decides the subsets, and keys the file.
    seeded_rows = bool(shuffle and validation_split)
    listing = index_directory(directory, labels, class_names, seeded_rows, int(seed), follow_links, verbose)
    if label_mode == "binary" and len(listing.class_names or ()) != 2:
        raise ValueError('When passing `label_mode="binary"`, there must be exactly 2 class_names. Received: '
                         f"class_names={listing.class_names}")
    num_classes = len(listing.class_names) if listing.class_names else 0
    explicit = listing.labels is not None and labels != "inferred"
    if explicit and len(listing.labels) and label_mode in ("categorical", "binary") and \
            int(np.max(listing.labels)) >= max(num_classes, 1):
        raise ValueError(f"{where}: labels holds {int(np.max(listing.labels))}, not below the {num_classes} classes "
                         f"{listing.class_names}: label_mode='{label_mode}' needs labels 0..{num_classes - 1} "
                         "(Keras would one-hot it to zeros)")
    if explicit and label_mode == "int":
        num_classes = 0  # given labels are used as they are (Keras): 5 stays 5, not checked against class_names
    parts = listed_subsets(listing, validation_split)
    wanted = {"training": ["train"], "validation": ["valid"], "both": ["train", "valid"], None: ["train"]}[subset]
    for name in wanted:
        what = "training" if name == "train" else "validation"
        if subset in ("training", "validation", "both"):
            n = len(parts[0 if name == "train" else 1].paths)
            print(f"Using {n} files for {what}.")
        if not parts[0 if name == "train" else 1].paths:
            kind = (" training" if name == "train" else " validation") if subset == "both" else ""
            raise ValueError(f"No{kind} images found in directory {directory}. Allowed formats: {ALLOWLIST_FORMATS}")
    labels_key = "none" if listing.labels is None else ("inferred" if labels == "inferred" else "given")
    split_key = json.dumps([seeded_rows, int(seed) if seeded_rows else None, validation_split,
                            list(listing.class_names or [])])
    out = cache_path(directory, recipe, labels_key, split_key, cache_dir)
    built = build_or_reuse(out, parts, recipe, listing.class_names,
                           progress_bar(verbose, "Decoding {total} images once (reused while the folder is unchanged):"))
    _warn_refused(built.meta.get("refused", []), where)
    datasets = []
    for name in wanted:
        has_y = listing.labels is not None

        def opener(shuffle: bool, batch_size: int, seed: Optional[int], _name: str = name, _y: bool = has_y) -> Any:
            return open_rows(built.path, x=f"x_{_name}", y=f"y_{_name}" if _y else None, batch_size=batch_size,
                             shuffle=shuffle, seed=seed, scale=1.0,
                             one_hot=num_classes if label_mode == "categorical" else None,
                             num_classes=num_classes or None)
        # Keras: the validation half of subset='both' is not shuffled.
        ds_shuffle = bool(shuffle) and not (subset == "both" and name == "valid")
        refused = [r for r in built.meta.get("refused", []) if r[0] in set(parts[0 if name == "train" else 1].paths)]
        paths = built.meta["file_paths"][name]
        if shuffle and not seeded_rows:  # Keras' file_paths: the list shuffled by the seed
            kept = set(paths)
            keras_order = list(listing.file_paths)
            np.random.RandomState(int(seed)).shuffle(keras_order)
            paths = [p for p in keras_order if p in kept]
        ds = ImageDataset(opener, label_mode, listing.class_names, paths, ds_shuffle,
                          batch_size or 32, int(seed), refused)
        datasets.append(ds if batch_size is not None else UnbatchedDataset(ds))
    return datasets if subset == "both" else datasets[0]
