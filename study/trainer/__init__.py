"""The shared distributed trainer: steps-to-target training on any tf.distribute strategy.

Importing this package imports TensorFlow: only trainer workers do.
"""
