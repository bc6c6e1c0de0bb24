"""Your model for `study` (written by ``study init``): edit ``build``.

`study` calls ``build`` inside each trial's distribution strategy scope with the keyword
arguments it declares among ``input_shape``, ``outputs``, ``task`` and ``workload``, and trains
what it returns with the trial's optimizer (batch size, learning rate, ...). Left uncompiled,
the model gets the workload's loss and metrics (``val_accuracy`` for mnist1d); a compiled model
brings its own. `study` imports this module from the folder it runs in.
"""

import keras


def build(input_shape, outputs):
    """An MLP, Dense(100, relu) x 2 -> Dense(outputs) logits (the built-in ``mlp``)."""
    return keras.Sequential(
        [
            keras.Input(shape=input_shape),
            keras.layers.Dense(100, activation="relu"),
            keras.layers.Dense(100, activation="relu"),
            keras.layers.Dense(outputs),
        ],
        name="my_mlp",
    )
