"""Your own Keras model (and loss) for `study`: plain functions, nothing to subclass.

`study` calls ``build`` inside the trial's distribution strategy scope with the keyword
arguments it declares among ``input_shape``, ``outputs``, ``task`` and ``workload``. A compiled
model brings its loss and metrics (reported as ``val_<name>``, computed on the whole validation
set); the optimizer always comes from the trial (batch size, learning rate, momentum, ...).

    PYTHONPATH=examples/own_model study train --workload mnist1d --model my_model:build \
        --target "val_top3>=0.9" --batch-size 64 --lr 0.05
"""

import keras


def build(input_shape, outputs):
    """A two-layer MLP with dropout, compiled with cross-entropy, accuracy and top-3 accuracy."""
    model = keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dropout(0.1),
            keras.layers.Dense(128, activation="relu"),
            keras.layers.Dense(outputs),
        ],
        name="my_mlp",
    )
    model.compile(
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=[
            keras.metrics.SparseCategoricalAccuracy(name="accuracy"),
            keras.metrics.SparseTopKCategoricalAccuracy(k=3, name="top3"),
        ],
    )
    return model


def smooth_ce(y_true, y_pred):
    """A per-example loss: cross-entropy with label smoothing 0.1 (``--loss my_model:smooth_ce``)."""
    classes = keras.ops.shape(y_pred)[-1]
    onehot = keras.ops.one_hot(keras.ops.cast(keras.ops.reshape(y_true, (-1,)), "int32"), classes)
    return keras.losses.categorical_crossentropy(
        onehot, y_pred, from_logits=True, label_smoothing=0.1
    )
