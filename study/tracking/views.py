"""The runs-table view a study's link opens: the columns a user sorts by, sorted by steps.

MLflow's runs table shows Dataset, Duration and Source by default and remembers columns per
browser only; but an experiment can carry a *saved view* (MLflow 3's shared view state): the
experiment tag ``mlflow.sharedViewState.<key>`` holds the table's state, and the link with
``viewStateShareKey=<key>`` opens it. Each study's experiment gets the view `VIEW_KEY`
("trials by steps to target"): columns batch size, learning rate, steps to target and status
(``params.batch_size``, ``params.optimizer.learning_rate``, ``metrics.summary/steps_to_target``,
``tags.status``) next to the dataset, sorted by steps to target (fewest first), with the parent
run unfolded to show its trials.

The tag's value is MLflow's envelope ``{"name", "createdAt", "updatedAt", "state"}`` with the
state as JSON text (an older UI that reads the state from the tag itself finds nothing it knows
and opens its default view). Trial run names carry the same numbers
(`study.tracking.descriptions.trial_run_name`) for a UI that shows no saved views.
"""

from __future__ import annotations

import json
import time
from typing import Any

#: The key of the study's saved view (the link's ``viewStateShareKey``).
VIEW_KEY = "study-trials"
#: The experiment tag holding a saved view, before its key.
VIEW_TAG_PREFIX = "mlflow.sharedViewState."
VIEW_NAME = "trials by steps to target"
#: The sort key of steps to target (the summary metric of every trial run).
STEPS_KEY = "metrics.`summary/steps_to_target`"
#: The runs table's columns in the view, as the UI names them (``TYPE.`KEY```).
COLUMNS = (
    "params.`batch_size`",
    "params.`optimizer.learning_rate`",
    STEPS_KEY,
    "tags.`status`",
    "attributes.`Dataset`",
)


def view_tag() -> str:
    """The experiment tag of the study's view."""
    return VIEW_TAG_PREFIX + VIEW_KEY


def view_state(parent_run_id: str | None = None) -> dict[str, Any]:
    """The runs table's state in the view (search facets and UI state as the UI keeps them)."""
    return {
        "searchFilter": "",
        "orderByKey": STEPS_KEY,
        "orderByAsc": True,
        "selectedColumns": list(COLUMNS),
        "runsExpanded": {parent_run_id: True} if parent_run_id else {},
    }


def view_value(parent_run_id: str | None = None, now_ms: int | None = None) -> str:
    """The tag's value: the saved-view envelope around `view_state`."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    state = json.dumps(view_state(parent_run_id))
    return json.dumps({"name": VIEW_NAME, "createdAt": now, "updatedAt": now, "state": state})


def view_query() -> str:
    """The query parameter that opens the view, for a runs-view link."""
    return f"viewStateShareKey={VIEW_KEY}"
