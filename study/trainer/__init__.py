"""The shared distributed trainer: steps-to-target training on any tf.distribute strategy.

Importing its modules imports TensorFlow: only trainer workers do (and `study.trainer.check`,
once a workload's data have passed their checks).
"""
