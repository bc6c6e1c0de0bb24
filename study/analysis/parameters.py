"""The parameters of the model of every trial, declared once: index, name, start and bounds.

A parameter vector (`Surrogate.theta`, a row of `Surrogate.draws`, a row of a covariance) is
indexed by `Param`; `DECLARED` gives each parameter's meaning, its starting value and its bounds
(``None`` where the data set them: the level of S(B), B_noise's range and the best rate's level
follow the measured trials, `study.analysis.surrogate._bounds`). `start_vector` builds a
starting point from the declared starts and the values the data give; `vector` builds one from
named values (zero elsewhere). Nothing else writes the order, a start or a fixed bound.

Example::

    theta = vector(log_s_min=math.log(100.0), log_b_noise=math.log(256.0))
    theta[Param.LOG_B_NOISE]  # log 256
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

__all__ = ["DECLARED", "PARAMS", "Declared", "Param", "declared", "start_vector", "vector"]


class Param(IntEnum):
    """A parameter's index in a parameter vector; ``Param.X.key`` is its name (``"x"``)."""

    LOG_S_MIN = 0
    LOG_B_NOISE = 1
    LR_LEVEL = 2
    ALPHA = 3
    BETA = 4
    LOG_C_LOW = 5
    LOG_SLOPE_LOW = 6
    LOG_K = 7
    LOG_SIGMA = 8
    LOG_KNEE = 9
    TAIL = 10

    @property
    def key(self) -> str:
        """The parameter's name: ``"log_b_noise"`` for `LOG_B_NOISE`."""
        return self.name.lower()

    @classmethod
    def of(cls, name: str | Param) -> Param:
        """The parameter named ``name`` (a `Param` passes through).

        Raises:
            KeyError: naming the parameters, for an unknown name.
        """
        if isinstance(name, Param):
            return name
        try:
            return cls[name.upper()]
        except KeyError:
            raise KeyError(
                f"unknown model parameter {name!r}; the parameters are {', '.join(PARAMS)}"
            ) from None


@dataclass(frozen=True)
class Declared:
    """One parameter: ``start`` (``None``: the data give it, `start_vector`), ``bounds``
    (``None``: the data set them) and what it means."""

    param: Param
    start: float | None
    bounds: tuple[float, float] | None
    meaning: str


DECLARED: tuple[Declared, ...] = (
    Declared(Param.LOG_S_MIN, None, None, "log S_min, the fewest steps at any batch size"),
    Declared(Param.LOG_B_NOISE, None, None, "log B_noise, where S_min and E_min / B cross"),
    Declared(Param.LR_LEVEL, None, None, "log of the best learning rate at B_ref"),
    Declared(Param.ALPHA, 0.5, (-3.0, 3.0), "the best rate's power of B"),
    Declared(Param.BETA, 0.0, (-2.0, 2.0), "the best rate's bend in log B (0: a power law)"),
    Declared(
        Param.LOG_C_LOW,
        -0.7,
        (math.log(1e-3), math.log(20.0)),  # 20: see study.analysis.surrogate._C_LOW_MAX
        "log curvature of log steps just below the best rate",
    ),
    Declared(
        Param.LOG_SLOPE_LOW,
        0.0,
        (math.log(0.05), math.log(20.0)),
        "log slope of log steps far below the best rate",
    ),
    Declared(
        Param.LOG_K, 0.0, (math.log(1e-3), math.log(30.0)), "log curvature above the best rate"
    ),
    Declared(
        Param.LOG_SIGMA,
        -1.6,
        (math.log(0.01), math.log(3.0)),
        "log spread of log steps between trials at one point",
    ),
    # The knee's sharpness q from McCandlish et al.'s 1 (the softest a fit may read: a softer
    # knee lets thin data at large batch sizes trade the knee for B_noise) to a corner.
    Declared(Param.LOG_KNEE, 0.0, (0.0, math.log(8.0)), "log q, the knee's sharpness of S(B)"),
    Declared(Param.TAIL, 0.05, (0.0, 0.4), "tau, the trial noise's tail (0: normal)"),
)
"""Every parameter, in `Param` order."""

PARAMS: tuple[str, ...] = tuple(p.key for p in Param)
"""The parameters' names in vector order (``report.json``'s ``model.parameters`` keys)."""

if tuple(d.param for d in DECLARED) != tuple(Param):  # pragma: no cover - a declaration slip
    raise RuntimeError("study.analysis.parameters: DECLARED must list every Param in order")


def declared(param: str | Param) -> Declared:
    """The declaration of ``param``."""
    return DECLARED[Param.of(param)]


def start_vector(**from_data: float) -> np.ndarray:
    """A starting point: the declared starts, with ``from_data`` (by name) on top.

    Raises:
        ValueError: when a parameter without a declared start is not given.
    """
    out = np.array([math.nan if d.start is None else d.start for d in DECLARED])
    for name, value in from_data.items():
        out[Param.of(name)] = value
    missing = [p.key for p in Param if math.isnan(out[p])]
    if missing:
        raise ValueError(f"start_vector needs {', '.join(missing)} from the data")
    return out


def vector(**values: float) -> np.ndarray:
    """A parameter vector with ``values`` by name and zero elsewhere."""
    out = np.zeros(len(Param))
    for name, value in values.items():
        out[Param.of(name)] = value
    return out
