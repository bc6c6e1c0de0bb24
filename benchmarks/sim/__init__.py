"""Synthetic scaling studies for the benchmarks and their tests (not part of the package).

`simulate` draws studies with a known truth; `coverage` runs on them the analysis a report
runs and checks how often the fits' intervals hold the truth
(``python benchmarks/interval_coverage.py``). The benchmarks import it as ``sim`` (their own
directory is on ``sys.path``); the tests through pytest's ``pythonpath`` (pyproject.toml).
"""
