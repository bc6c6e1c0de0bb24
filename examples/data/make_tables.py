"""Write ``houses.csv`` (regression) and ``churn.csv`` (binary): small tables for the ``csv`` workload.

Deterministic (seeded): running it again gives the same bytes.

- ``houses.csv``: area, rooms, age and distance to the centre; ``price_k`` is a smooth function
  of them (area times a location factor, minus age) plus noise: a linear fit explains 87% of
  its variance, the csv ``mlp`` about 95% (validation MSE ~0.05 on the standardised price after
  ~100 SGD steps at batch 16). ``task=regression`` standardises it; the default target
  ``val_mse<=0.5`` is easy here, a study would ask for ``val_mse<=0.1``.
- ``churn.csv``: tenure, monthly fee, support calls and a discount flag; ``churned`` is ``yes``
  or ``no`` from a logistic model of them (``yes`` is the positive class: it sorts last; 41%
  of rows). ``task=binary``; the ``mlp`` reaches validation AUC ~0.96, so the default target
  ``val_auc>=0.9`` is reached within a few dozen steps.

    python examples/data/make_tables.py                      # 240 rows each, a few KB
    python examples/data/make_tables.py --rows 20000 --out /tmp/tables
"""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np


def houses(rows: int, rng: np.random.Generator) -> tuple[list[str], list[list[object]]]:
    area = rng.uniform(30, 200, rows)
    rooms = np.clip(np.round(area / 30 + rng.normal(0, 0.7, rows)), 1, 8)
    age = rng.uniform(0, 80, rows)
    distance = rng.exponential(6.0, rows)
    location = 1.0 + 1.5 * np.exp(-distance / 4.0)
    price = 2.2 * area * location + 12.0 * rooms - 0.9 * age + rng.normal(0, 50.0, rows)
    table = [
        [round(a, 1), int(r), round(g, 1), round(d, 2), round(p, 1)]
        for a, r, g, d, p in zip(area, rooms, age, distance, price)
    ]
    return ["area_m2", "rooms", "age_years", "distance_km", "price_k"], table


def churn(rows: int, rng: np.random.Generator) -> tuple[list[str], list[list[object]]]:
    tenure = rng.integers(1, 72, rows)
    fee = rng.uniform(15, 120, rows)
    calls = rng.poisson(1.5, rows)
    discount = rng.integers(0, 2, rows)
    logit = 2.0 - 0.12 * tenure + 0.045 * (fee - 60) + 1.3 * calls - 1.8 * discount
    churned = rng.random(rows) < 1.0 / (1.0 + np.exp(-logit))
    table = [
        [int(t), round(f, 2), int(c), int(d), "yes" if y else "no"]
        for t, f, c, d, y in zip(tenure, fee, calls, discount, churned)
    ]
    return ["tenure_months", "monthly_fee", "support_calls", "discount", "churned"], table


def write(path: Path, header: list[str], table: list[list[object]]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(table)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=240)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path(__file__).parent)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(args.seed)
    write(args.out / "houses.csv", *houses(args.rows, rng))
    write(args.out / "churn.csv", *churn(args.rows, rng))


if __name__ == "__main__":
    main()
