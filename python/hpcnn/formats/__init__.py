"""The layouts of the files hpcnn reads and writes, below the models (they never name a model
class: a model is what they are handed): Keras' ``.keras`` archives (keras_archive.py), Keras'
weights layouts (keras_weights.py), Keras' model and compile configs (keras_config.py,
compile_config.py, keras_objects.py), hpcnn's own description and state beside them
(hpcnn_files.py), BackupAndRestore's backups (backup_file.py), an HDF5 file's listing
(h5tree.py), and saving a model and its weights (model_files.py). What the loaders read is bounded
by file_limits.py's constants; every JSON text from a file is parsed by config_json.py. Building a model from a file is
hpcnn.saving's."""
