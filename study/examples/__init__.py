"""The study files shipped inside the package, so that an installed wheel has them.

``study run --example quickstart`` runs ``quickstart.yaml`` from here; ``study init NAME``
starts a study of your own from it (`starter`). A checkout's ``search_spaces/NAME.yaml`` are
links to these files (one copy, nothing to keep in step); ``search_spaces/csv_example.yaml``
stays there alone, since it reads a data file of the checkout.

Example: ``names()`` is ``["mnist1d_cnn", "mnist1d_mlp", "quickstart", "shapes_resnet",
"tabular_strategies"]``; ``path("quickstart")`` is this folder's ``quickstart.yaml``.
"""

from __future__ import annotations

import re
from pathlib import Path

from study.errors import FieldError

FOLDER = Path(__file__).parent
#: The example `starter` begins from, and the model module it copies.
STARTER = "quickstart"
STARTER_MODEL = FOLDER / "starter_model.py"


def names() -> list[str]:
    """The shipped examples, sorted: each ``NAME.yaml`` of this folder."""
    return sorted(p.stem for p in FOLDER.glob("*.yaml"))


def path(name: str) -> Path:
    """The study file of example ``name``.

    Raises:
        FieldError: on ``example``: "unknown example 'x'; choose from mnist1d_cnn, ...".
    """
    if name not in names():
        problem = f"unknown example {name!r}; choose from {', '.join(names())}"
        raise FieldError("example", detail=problem, value=name)
    return FOLDER / f"{name}.yaml"


def model_module(name: str) -> str:
    """The module `starter` writes a study's model into: ``NAME_model`` with ``-`` and ``.``
    made ``_`` (a dot would name a package), e.g. ``model_module("my-study") == "my_study_model"``."""
    return re.sub(r"[-.]", "_", name) + "_model"


def starter(name: str) -> dict[str, str]:
    """The files of a new study ``name``, by file name: ``NAME.yaml``, the quickstart with that
    name and the model ``build`` of ``NAME_model.py``, a copy of ``starter_model.py`` (the
    quickstart's ``mlp``, to edit)."""
    module = model_module(name)
    text = path(STARTER).read_text(encoding="utf-8")
    body = text[text.index("\nname: ") + 1 :]  # the quickstart's settings, without its header
    swaps = {"name: quickstart\n": f"name: {name}\n", "model: mlp\n": f"model: {module}:build\n"}
    for old, new in swaps.items():
        if old not in body:  # the quickstart changed: say so rather than write a wrong file
            raise AssertionError(f"{STARTER}.yaml has no line {old.strip()!r}")
        body = body.replace(old, new, 1)
    header = (
        f"# Study {name!r}, written by `study init {name}`: the quickstart with your own model,\n"
        f"# {module}.py (build). Run it in this folder:  study run {name}.yaml\n"
    )
    return {f"{name}.yaml": header + body, f"{module}.py": STARTER_MODEL.read_text("utf-8")}
