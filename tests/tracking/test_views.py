"""The saved runs-table view of a study's trials: the envelope MLflow's UI reads and the state
it opens (columns, order, the parent unfolded)."""

from __future__ import annotations

import json

from study.tracking.views import COLUMNS, view_query, view_state, view_tag, view_value


def test_the_view_is_an_experiment_tag_the_link_names() -> None:
    assert view_tag() == "mlflow.sharedViewState.study-trials"
    assert view_query() == "viewStateShareKey=study-trials"


def test_the_view_shows_the_sortable_columns_fewest_steps_first() -> None:
    envelope = json.loads(view_value("run-1", now_ms=1700000000000))

    assert (envelope["name"], envelope["createdAt"], envelope["updatedAt"]) == (
        "trials by steps to target",
        1700000000000,
        1700000000000,
    )
    state = json.loads(envelope["state"])  # MLflow keeps the state as JSON text
    assert state == view_state("run-1")
    assert (
        state["selectedColumns"]
        == [
            "params.`batch_size`",
            "params.`optimizer.learning_rate`",
            "metrics.`summary/steps_to_target`",
            "tags.`status`",
            "attributes.`Dataset`",
        ]
        == list(COLUMNS)
    )
    assert (state["orderByKey"], state["orderByAsc"]) == ("metrics.`summary/steps_to_target`", True)
    assert state["runsExpanded"] == {"run-1": True}
    assert view_state()["runsExpanded"] == {}
