"""study: experiment-tracked hyperparameter scaling studies for TensorFlow models.

Importing this package is cheap: TensorFlow, MLflow and Optuna are imported only by the
modules that need them.
"""

__version__ = "0.1.0"
