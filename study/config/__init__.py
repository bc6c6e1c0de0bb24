"""Typed, validated inputs: the data model of trials and studies, and the study-file parser.

- `rules`: the interval rules every value is checked against, and `FieldError` (field, rule,
  value) that the data model raises and each front end names: ``study train`` by its flag,
  the study-file parser by file and key.
- `target` (`Target`), `trial` (`TrialSpec`, `OptimizerSpec`, `ScheduleSpec`, `Budget`,
  `EvalCadence`): one trial.
- `space` (`Stratum`, the params, `SearchSpace`) and `study` (`StudyConfig`, `TunerSettings`):
  one study.
- `studyfile`: the YAML format and its parser (`load_study_file`, `parse_study`), reading
  through `yaml_reader` (key-by-key checks with one-line errors, duplicate keys rejected).

Strategy names are parsed by `study.strategies.StrategySpec`, for both front ends.
"""
