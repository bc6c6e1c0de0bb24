"""One door per dependency: every private name of a third-party package `study` relies on.

Each module here wraps what one dependency offers only privately, in a few functions whose
docstrings name the private name used, the versions it was checked at and what happens when it
has moved: `tf_internals` (TensorFlow), `keras_internals` (Keras), `keras_tuner_internals`
(KerasTuner), `mlflow_internals` (MLflow), `scipy_internals` (SciPy), `sklearn_internals`
(scikit-learn), `optuna_internals` (Optuna, for `study.ledger`). No
other module of `study` reaches a private name of these packages or of `multiprocessing`
(`tests/test_private_names.py`); each module's contract test
(``tests/adapters/test_<module>.py``) states what it relies on, and CI runs those tests at the
oldest versions ``pyproject.toml`` allows as well as the newest. The modules are named
``*_internals`` so that none shadows the package it wraps; importing one imports its dependency
(KerasTuner's and Optuna's at once, the others' when a function is called), so light modules
import none of them.
"""
