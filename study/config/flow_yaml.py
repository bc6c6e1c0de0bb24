"""A YAML dumper for study-file snippets: lists of small mappings one item a line, each in flow
style (``- {from_examples: 0, batch_size: 32}``), and ``{alpha: A}`` in flow style."""

from __future__ import annotations

import yaml

__all__ = ["Flow", "FlowDumper"]


class Flow(list):
    """A list YAML writes one item a line, each item in flow style (``- {a: 1, b: 2}``)."""


class FlowDumper(yaml.SafeDumper):
    """Writes `Flow` lists and ``{alpha: A}`` in flow style."""


def _flow_list(dumper: yaml.SafeDumper, data: Flow) -> yaml.Node:
    items = [dumper.represent_mapping("tag:yaml.org,2002:map", m, flow_style=True) for m in data]
    return yaml.SequenceNode("tag:yaml.org,2002:seq", items, flow_style=False)


FlowDumper.add_representer(Flow, _flow_list)
FlowDumper.add_representer(
    dict,
    lambda d, m: d.represent_mapping(
        "tag:yaml.org,2002:map", m.items(), flow_style=set(m) == {"alpha"}
    ),
)
