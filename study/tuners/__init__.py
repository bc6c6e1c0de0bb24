"""Search backends: Optuna and KerasTuner propose trials inside each (batch_size, strategy) stratum.

`optuna_space` and `keras_tuner_space` are the only modules that translate the backend-neutral
`study.config.studyfile.SearchSpace` into each library's search-space objects.
"""
