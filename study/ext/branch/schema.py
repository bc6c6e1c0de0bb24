"""The ``branch:`` section's JSON-schema fragment (`docs/generate.py` writes it into
``study/config/study.schema.json``; `study.ext.branch.section` reads the section)."""

from __future__ import annotations

from typing import Any

SCHEMA: dict[str, Any] = {
    "description": "Branch trials of `study branch FILE`: a reference run at batch_size (B0) stores checkpoints; from each, branches at k x B0 train a window of examples; CBS(t) is the largest batch within tolerance of the B0 branch (study.ext.branch.section).",
    "type": ["object", "null"],
    "additionalProperties": False,
    "properties": {
        "batch_size": {"type": "integer", "minimum": 1},
        "learning_rate": {"type": "number", "exclusiveMinimum": 0},
        "examples": {"type": "integer", "minimum": 1},
        "checkpoints": {
            "oneOf": [
                {"type": "integer", "minimum": 2},
                {"type": "array", "items": {"type": "integer", "minimum": 1}, "minItems": 2},
            ]
        },
        "first_checkpoint": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "multipliers": {"type": "array", "items": {"type": "integer", "minimum": 2}, "minItems": 1},
        "window": {"type": "integer", "minimum": 1},
        "replicates": {"type": "integer", "minimum": 1},
        "max_replicates": {
            "type": "integer",
            "minimum": 1,
            "description": "more replicates, round by round, where CBS's interval is wider than resolve (default: replicates, no more rounds)",
        },
        "resolve": {
            "type": "number",
            "exclusiveMinimum": 1,
            "description": "the widest CBS interval (high / low) a checkpoint is left at while replicates may be added (default 4)",
        },
        "max_examples": {
            "type": ["integer", "null"],
            "minimum": 1,
            "description": "the most examples the branches train, rounds included (default: no cap)",
        },
        "evaluations": {
            "type": "integer",
            "minimum": 1,
            "description": "evaluations each branch averages over its window's last quarter (default 4)",
        },
        "recalibrate_batchnorm": {
            "type": "boolean",
            "default": True,
            "description": "before each evaluation, the BatchNorm layers of every branch and of the reference take the statistics of the same 2,048 training examples (default true)",
        },
        "lr_rule": {"enum": ["fit", "search"], "default": "fit"},
        "alpha": {"type": "number"},
        "search_factors": {
            "type": "array",
            "items": {"type": "number", "exclusiveMinimum": 0},
            "minItems": 1,
        },
        "tolerance": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "loss": {"type": "number", "minimum": 0, "default": 0.5},
                "metric": {"type": ["number", "null"], "minimum": 0},
                "basis": {"enum": ["progress", "loss"], "default": "progress"},
            },
        },
        "confidence": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
    },
}
