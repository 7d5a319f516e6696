"""Which files of a folder are images, their labels and class names, and the training/validation split:
Keras 3.15's rules (``keras.utils.image_dataset_from_directory``, its ``dataset_utils.index_directory``),
so that the same folder, seed and split give the same files in the same subset, in the same order.

- Class folders: the folder's sub-folders in sorted order, hidden ones (a name starting with ".")
  left out; a sub-folder that is a symbolic link to a folder is a class too (as ``os.path.isdir``).
- Files: each class folder walked recursively (``os.walk``; into linked sub-folders only with
  ``follow_links``, a link looping back to a folder already walked not followed: a warning names it),
  folders in sorted order of their path, files in sorted order of their name;
  a file is listed when its lower-cased name ends with .bmp, .gif, .jpeg, .jpg or .png. Hidden files
  are listed as Keras lists them (a macOS "._photo.jpg" is then reported as not an image).
- Shuffle: with ``shuffle`` the list is shuffled with ``numpy.random.RandomState(seed)`` (the labels
  with a second generator of the same seed), then split: the last ``int(validation_split * n)``
  files are the validation subset, the others the training subset, in that order.
"""
from __future__ import annotations

import os
import warnings
from typing import List, Optional, Sequence, Tuple

import numpy as np

ALLOWLIST_FORMATS = (".bmp", ".gif", ".jpeg", ".jpg", ".png")

__all__ = ["ALLOWLIST_FORMATS", "Listing", "index_directory", "check_validation_split_arg", "split"]


class Listing:
    """The files of a folder in Keras' order: ``file_paths`` (the folder joined with each file's path
    relative to it), ``labels`` (int32 array, or None without labels) and ``class_names`` (None
    without labels)."""

    def __init__(self, file_paths: List[str], labels: Optional[np.ndarray], class_names: Optional[List[str]]):
        self.file_paths, self.labels, self.class_names = file_paths, labels, class_names


def check_validation_split_arg(validation_split: Optional[float], subset: Optional[str], shuffle: bool,
                               seed: Optional[int]) -> None:
    """Keras' checks of validation_split/subset/seed (ValueError with Keras' wording)."""
    if validation_split and not 0 < validation_split < 1:
        raise ValueError(f"`validation_split` must be between 0 and 1, received: {validation_split}")
    if (validation_split or subset) and not (validation_split and subset):
        raise ValueError("If `subset` is set, `validation_split` must be set, and inversely.")
    if subset not in ("training", "validation", "both", None):
        raise ValueError(f'`subset` must be either "training", "validation" or "both", received: {subset}')
    if validation_split and shuffle and seed is None:
        raise ValueError("If using `validation_split` and shuffling the data, you must provide a `seed` argument, "
                         "to make sure that there is no overlap between the training and validation subset.")


def _class_folders(directory: str) -> List[str]:
    return [d for d in sorted(os.listdir(directory)) if os.path.isdir(os.path.join(directory, d))
            and not d.startswith(".")]


def _walk(folder: str, follow_links: bool):
    """os.walk, except that with follow_links a folder already walked (a link back up: a loop) is
    not walked again: os.walk would go round until the path is too long, listing the same files
    thousands of times. A warning names the link."""
    if not follow_links:
        yield from os.walk(folder)
        return
    seen = set()
    for root, dirs, files in os.walk(folder, followlinks=True):
        st = os.stat(root)
        if (st.st_dev, st.st_ino) in seen:
            warnings.warn(f"image_dataset_from_directory: {root} is a folder already listed (a symbolic link loop): "
                          "not walked again", UserWarning, stacklevel=4)
            dirs[:] = []
            continue
        seen.add((st.st_dev, st.st_ino))
        yield root, dirs, files


def _files_under(folder: str, follow_links: bool) -> List[str]:
    """The image files under `folder`, relative to it, in Keras' order (see the module's text)."""
    out = []
    for root, _, files in sorted(_walk(folder, follow_links), key=lambda w: w[0]):
        for name in sorted(files):
            if name.lower().endswith(ALLOWLIST_FORMATS):
                out.append(os.path.relpath(os.path.join(root, name), folder))
    return out


def index_directory(directory: str, labels, class_names: Optional[Sequence[str]], shuffle: bool, seed: int,
                    follow_links: bool, verbose: bool) -> Listing:
    """The listing of `directory` as Keras makes it (labels: 'inferred', a list of integers, or None)."""
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"image_dataset_from_directory: '{directory}' is not a folder (or does not exist)")
    if labels == "inferred":
        subdirs = _class_folders(directory)
        if class_names is not None:
            if not set(class_names).issubset(set(subdirs)):
                raise ValueError("The `class_names` passed did not match the names of the subdirectories of the "
                                 f"target directory. Expected: {subdirs} (or a subset of it), but received: "
                                 f"class_names={list(class_names)}")
            subdirs = list(class_names)  # the order given
    else:
        subdirs = [""]
        if class_names is not None:
            if labels is None:
                raise ValueError("When `labels=None` (no labels), argument `class_names` cannot be specified.")
            raise ValueError("When argument `labels` is specified, argument `class_names` cannot be specified "
                             "(the `class_names` will be the sorted list of labels).")
    names = list(subdirs)
    filenames: List[str] = []
    found_labels: List[int] = []
    for index, sub in enumerate(subdirs):
        folder = os.path.join(directory, sub)
        base = os.path.basename(folder)
        for rel in _files_under(folder, follow_links):
            filenames.append(os.path.join(base, rel))
            found_labels.append(index)
    out_labels: Optional[np.ndarray]
    if labels == "inferred":
        out_labels = np.asarray(found_labels, dtype=np.int32)
    elif labels is None:
        out_labels, names = None, None
    else:
        if len(labels) != len(filenames):
            raise ValueError("Expected the lengths of `labels` to match the number of files in the target directory. "
                             f"len(labels) is {len(labels)} while we found {len(filenames)} files in directory "
                             f"{directory}.")
        names = [str(v) for v in sorted(set(labels))]
        out_labels = np.asarray(labels)
    if verbose:
        if out_labels is None:
            print(f"Found {len(filenames)} files.")
        else:
            print(f"Found {len(filenames)} files belonging to {len(names)} classes.")
    paths = [os.path.join(directory, f) for f in filenames]
    if shuffle:
        np.random.RandomState(seed).shuffle(paths)
        if out_labels is not None:
            np.random.RandomState(seed).shuffle(out_labels)
    return Listing(paths, out_labels, names)


def split(listing: Listing, validation_split: Optional[float], subset: Optional[str]) -> Tuple[List[str], Optional[np.ndarray]]:
    """The files (and labels) of `subset` ('training' or 'validation'), printing Keras' "Using N files
    for ..." line; everything without a validation_split."""
    paths, labels = listing.file_paths, listing.labels
    if not validation_split:
        return paths, labels
    n_val = int(validation_split * len(paths))
    if subset == "training":
        print(f"Using {len(paths) - n_val} files for training.")
        return paths[:-n_val], (labels[:-n_val] if labels is not None else None)
    if subset == "validation":
        print(f"Using {n_val} files for validation.")
        return paths[-n_val:], (labels[-n_val:] if labels is not None else None)
    raise ValueError(f'`subset` must be either "training" or "validation", received: {subset}')
