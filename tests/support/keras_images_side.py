"""Keras' own image_dataset_from_directory, run in TensorFlow's interpreter for the live comparisons
(tests/support/image_folders.run_keras): `python keras_images_side.py WHAT ARGS_JSON OUT_JSON`.

- listing: file_paths and class_names of each (seed, subset) of args['cases'];
- pixels: every image of the folder (shuffle=False) saved to args['npy'], and the file paths;
- resize: tf.image.resize of the arrays in args['npz'] (each key an image) saved to args['npy_out'].
Runs as a plain file (no hpcnn, no tests package): it is TensorFlow's side."""
import json
import sys

import numpy as np


def main() -> None:
    what, args, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    import keras
    import tensorflow as tf
    reply = {"keras": keras.__version__, "tensorflow": tf.__version__}
    if what == "listing":
        for case in args["cases"]:
            ds = keras.utils.image_dataset_from_directory(args["dir"], image_size=(8, 8), verbose=False, **case)
            sets = ds if isinstance(ds, list) else [ds]
            reply[json.dumps(case, sort_keys=True)] = [{"file_paths": d.file_paths, "class_names": d.class_names}
                                                       for d in sets]
    elif what == "pixels":
        ds = keras.utils.image_dataset_from_directory(args["dir"], shuffle=False, batch_size=10000, verbose=False,
                                                      **args.get("kw", {}))
        batches = [b[0].numpy() if isinstance(b, tuple) else b.numpy() for b in ds]
        np.save(args["npy"], np.concatenate(batches))
        reply["file_paths"] = ds.file_paths
    elif what == "resize":
        data = np.load(args["npz"])
        res = {}
        for k in data.files:
            size, method = args["sizes"][k], args["methods"][k]
            res[k] = tf.image.resize(data[k], size, method=method).numpy()
        np.savez(args["npy_out"], **res)
    with open(out, "w") as f:
        json.dump(reply, f)


if __name__ == "__main__":
    main()
