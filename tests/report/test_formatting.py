"""How the report writes numbers, intervals and confidence levels."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from study.report.formatting import ci_text, fmt, interval_text, percent


def test_fmt_gives_readable_numbers() -> None:
    assert fmt(1170.0) == "1170"
    assert fmt(0.017168) == "0.0172"
    assert fmt(396.78) == "397"
    assert fmt(20992.0) == "20,992" and fmt(1e12) == "1.00e+12"
    assert fmt(22.406) == "22.4"
    assert fmt(math.inf) == "inf" and fmt(-math.inf) == "-inf"
    assert fmt(math.nan) == "-" and fmt(None) == "-" and fmt(pd.NA) == "-"
    assert fmt(3e-7) == "3.00e-07"
    assert fmt(0.4567, 2) == "0.46"


def test_fmt_passes_text_and_booleans_through() -> None:
    assert fmt("mirrored:2") == "mirrored:2"
    assert fmt(np.bool_(True)) == "yes" and fmt(False) == "no"
    assert fmt(np.int64(128)) == "128"


def test_percent_follows_the_confidence() -> None:
    assert percent(0.95) == "95%"
    assert percent(0.9) == "90%"
    assert percent(0.975) == "97.5%"
    assert percent(0.68) == "68%"


def test_intervals_in_sentences_and_cells() -> None:
    assert ci_text((75.2, 601.0), 0.95) == " (95% CI 75.2 to 601)"
    assert ci_text((0.4212, 1.0199), 0.9, 2) == " (90% CI 0.42 to 1)"
    assert ci_text(None, 0.95) == ""
    assert interval_text((75.2, 601.0)) == "75.2 to 601"
    assert interval_text(None) == "-"
