"""The tutorial seed's Keras code (the CIFAR-10 "Deep learning CPU vs GPU" lesson), run on hpcnn with
only its import lines changed, on small synthetic data.

LESSON below is the lesson's code as it is written (TensorFlow / Keras 2 era), its cells
separated by ``#%%`` lines. The test changes the import lines (``tensorflow`` / ``keras`` ->
``hpcnn`` / ``hpcnn.keras``), and, to run small: cifar10.load_data() gives 300 + 100 synthetic
images, the HDF5 datasets' sizes follow them (the lesson writes 50000 / 10000), 2 epochs instead
of 10, and the GPU cell runs on the CPU where no GPU is usable. Nothing else.

The lesson has one bug: it trains `model` before compiling it (its cell ``#%% uncompiled``).
Keras refuses that ("You must call compile()", a ValueError in Keras 3, a RuntimeError in
tf.keras 2) and so does hpcnn (RuntimeError, checked); the test then compiles `model` as the
lesson's next cell compiles its clone (LESSON_FIX), and runs the cell again, as a student would.
"""
import re

import numpy as np
import pytest

import hpcnn

LESSON = '''
import numpy as np
import matplotlib.pyplot as plt

import tensorflow as tf
import h5py
import keras
from keras.datasets import cifar10
from tensorflow.keras.models import Sequential
from tensorflow.keras.layers import Dense, Conv2D, Flatten, MaxPooling2D, Input, InputLayer, Dropout
import keras.layers.merge as merge
from keras.layers.merge import Concatenate
from tensorflow.keras.utils import to_categorical
from tensorflow.keras.optimizers import SGD, Adam

gpus = tf.config.list_physical_devices('GPU')
cpus = tf.config.list_physical_devices('CPU')

(x_train, y_train), (x_valid, y_valid) = cifar10.load_data()
nb_classes = 10
class_names = ['airplane', 'automobile', 'bird', 'cat', 'deer', 'dog', 'frog', 'horse', 'ship', 'truck']
print('Train: X=%s, y=%s' % (x_train.shape, y_train.shape))
print('Test: X=%s, y=%s' % (x_valid.shape, y_valid.shape))
print('number of classes= %s' %len(set(y_train.flatten())))
print(type(x_train))

plt.figure(figsize=(8, 8))
for i in range(2*7):
    # define subplot
    plt.subplot(2, 7, i+1)
    plt.imshow(x_train [i])
    class_index = np.argmax(to_categorical(y_train[i], 10))
    plt.title(class_names[class_index], fontsize=9)

with h5py.File('dataset_cifar10.hdf5', 'w') as hf:
    dset_x_train = hf.create_dataset('x_train', data=x_train, shape=(50000, 32, 32, 3), compression='gzip', chunks=True)
    dset_y_train = hf.create_dataset('y_train', data=y_train, shape=(50000, 1), compression='gzip', chunks=True)
    dset_x_test = hf.create_dataset('x_valid', data=x_valid, shape=(10000, 32, 32, 3), compression='gzip', chunks=True)
    dset_y_test = hf.create_dataset('y_valid', data=y_valid, shape=(10000, 1), compression='gzip', chunks=True)

model = tf.keras.Sequential()
model.add(InputLayer(input_shape=[32, 32, 3]))

model.add(Conv2D(filters=32, kernel_size=3, padding='same', activation='relu'))
model.add(MaxPooling2D(pool_size=[2,2], strides=[2, 2], padding='same'))

model.add(Conv2D(filters=64, kernel_size=3, padding='same', activation='relu'))
model.add(MaxPooling2D(pool_size=[2,2], strides=[2, 2], padding='same'))

model.add(Conv2D(filters=128, kernel_size=3, padding='same', activation='relu'))
model.add(MaxPooling2D(pool_size=[2,2], strides=[2, 2], padding='same'))

model.add(Conv2D(filters=256, kernel_size=3, padding='same', activation='relu'))
model.add(MaxPooling2D(pool_size=[2,2], strides=[2, 2], padding='same'))

model.add(Flatten())

model.add(Dense(256, activation='relu'))
model.add(Dropout(0.2))

model.add(Dense(512, activation='relu'))
model.add(Dropout(0.2))

model.add(Dense(10, activation='softmax'))

model.summary()

class DataGenerator(tf.keras.utils.Sequence):

    def __init__(self, batch_size, test=False, shuffle=True):

        PATH_TO_FILE = 'dataset_cifar10.hdf5'

        self.hf = h5py.File(PATH_TO_FILE, 'r')
        self.batch_size = batch_size
        self.test = test
        self.shuffle = shuffle
        self.on_epoch_end()

    def __del__(self):
        self.hf.close()

    def __len__(self):
        return int(np.ceil(len(self.indices) / self.batch_size))

    def __getitem__(self, idx):
        start = self.batch_size * idx
        stop = self.batch_size * (idx+1)

        if self.test:
            x = self.hf['x_valid'][start:stop, ...]
            batch_x = np.array(x).astype('float32') / 255.0
            y = self.hf['y_valid'][start:stop]
            batch_y = to_categorical(np.array(y), 10)
        else:
            x = self.hf['x_train'][start:stop, ...]
            batch_x = np.array(x).astype('float32') / 255.0
            y = self.hf['y_train'][start:stop]
            batch_y = to_categorical(np.array(y), 10)

        return batch_x, batch_y

    def on_epoch_end(self):
        if self.test:
            self.indices = np.arange(self.hf['x_valid'][:].shape[0])
        else:
            self.indices = np.arange(self.hf['x_train'][:].shape[0])

        if self.shuffle:
            np.random.shuffle(self.indices)

batchsize  = 250
data_train = DataGenerator(batch_size=batchsize)
data_valid = DataGenerator(batch_size=batchsize, test=True, shuffle=False)

#%% uncompiled
with tf.device('/device:CPU:0'):
    history = model.fit(data_train,epochs=10,
                        verbose=1, validation_data=data_valid)
#%%
from tensorflow.keras.models import clone_model
new_model = clone_model(model)
opt = keras.optimizers.Adam(learning_rate=0.001)
new_model.compile(optimizer=opt, loss='categorical_crossentropy', metrics=['accuracy'])

with tf.device('/device:GPU:0'):
    new_history = new_model.fit(data_train,epochs=10,
                                verbose=1, validation_data=data_valid)
#%%

fig, axes = plt.subplots(1,2, figsize=[16, 6])
axes[0].plot(history.history['loss'], label='train_loss')
axes[0].plot(history.history['val_loss'], label='val_loss')
axes[0].set_title('Loss')
axes[0].legend()
axes[0].grid()
axes[1].plot(history.history['accuracy'], label='train_acc')
axes[1].plot(history.history['val_accuracy'], label='val_acc')
axes[1].set_title('Accuracy')
axes[1].legend()
axes[1].grid()

x = x_valid.astype('float32') / 255.0
y = to_categorical(y_valid, 10)
score = new_model.evaluate(x, y, verbose=0)
print('Test cross-entropy loss: %0.5f' % score[0])
print('Test accuracy: %0.2f' % score[1])

y_pred = new_model.predict_classes(x)

plt.figure(figsize=(8, 8))
for i in range(20):
    plt.subplot(4, 5, i+1)
    plt.imshow(x[i].reshape(32,32,3))
    index1 = np.argmax(y[i])
    plt.title("y: %s\\np: %s" % (class_names[index1], class_names[y_pred[i]]), fontsize=9, loc='left')
    plt.subplots_adjust(wspace=0.5, hspace=0.4)
'''

# The only edits: the import lines...
IMPORTS = [
    ("import tensorflow as tf", "import hpcnn as tf"),
    ("import keras\n", "from hpcnn import keras\n"),
    ("from keras.datasets import", "from hpcnn.keras.datasets import"),
    ("from tensorflow.keras.", "from hpcnn.keras."),
    ("import keras.layers.merge as merge", "import hpcnn.keras.layers.merge as merge"),
    ("from keras.layers.merge import", "from hpcnn.keras.layers.merge import"),
]
LESSON_FIX = "model.compile(optimizer=Adam(learning_rate=0.001), loss='categorical_crossentropy', metrics=['accuracy'])"
# ... and the size of the run.
SMALL = [("shape=(50000,", "shape=(len(x_train),"), ("shape=(10000,", "shape=(len(x_valid),"),
         ("epochs=10", "epochs=2")]


def hpcnn_lesson():
    """The lesson's cells as (title, code), edited as the module's docstring says."""
    code = LESSON
    edits = IMPORTS + SMALL
    if not hpcnn.list_physical_devices("GPU"):
        edits = edits + [("tf.device('/device:GPU:0')", "tf.device('/device:CPU:0')")]
    for old, new in edits:
        assert old in code, old
        code = code.replace(old, new)
    assert not re.search(r"^\s*(import|from) (tensorflow|keras)\b", code, re.M)
    cells = re.split(r"^#%%", code, flags=re.M)
    out = [("", cells[0])]
    for c in cells[1:]:  # each after a '#%% <title>' line
        title, _, body = c.partition("\n")
        out.append((title.strip(), body))
    return out


def synthetic_cifar10():
    rng = np.random.default_rng(0)
    y_train, y_valid = rng.integers(0, 10, (300, 1)).astype(np.uint8), rng.integers(0, 10, (100, 1)).astype(np.uint8)
    # Learnable: each class a brightness level plus noise.
    def images(y):
        return np.clip(y[:, :, None, None] * 25 + rng.integers(0, 30, (len(y), 32, 32, 3)), 0, 255).astype(np.uint8)
    return (images(y_train), y_train), (images(y_valid), y_valid)


def test_the_tutorial_runs_with_only_the_import_changed(tmp_path, monkeypatch, capsys):
    pytest.importorskip("h5py")  # the lesson writes its HDF5 file with h5py (hpcnn's test extra installs it)
    matplotlib = pytest.importorskip("matplotlib", reason="the lesson plots with matplotlib (the jupyter extra)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(hpcnn.datasets.cifar10, "load_data", synthetic_cifar10)
    scope = {}
    try:
        for title, cell in hpcnn_lesson():
            if title == "uncompiled":
                with pytest.raises(RuntimeError, match=r"the model must be compiled first: call model.compile"):
                    exec(compile(cell, "lesson", "exec"), scope)
                exec(LESSON_FIX, scope)
            exec(compile(cell, "lesson", "exec"), scope)
    finally:
        plt.close("all")
        for name in ("data_train", "data_valid"):  # close the lesson's h5py files (its __del__ does)
            scope.pop(name, None)
        import gc
        gc.collect()
    out = capsys.readouterr().out
    assert "Train: X=(300, 32, 32, 3), y=(300, 1)" in out and "number of classes= 10" in out
    assert "Total params: 787,530" in out  # model.summary(), as Keras prints it
    for name in ("history", "new_history"):
        hist = scope[name].history
        assert len(hist["loss"]) == 2 and all(np.isfinite(hist[k]).all() for k in ("loss", "val_loss", "accuracy",
                                                                                      "val_accuracy"))
    loss, acc = scope["score"]
    assert np.isfinite(loss) and 0 <= acc <= 1 and "Test accuracy:" in out
    assert scope["y_pred"].shape == (100,) and set(scope["y_pred"]) <= set(range(10))
