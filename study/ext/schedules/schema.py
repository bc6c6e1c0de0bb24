"""The ``batch_schedule:`` section's JSON-schema fragment (`docs/generate.py` writes it into
``study/config/study.schema.json``; `study.ext.schedules.section` reads the section)."""

from __future__ import annotations

from typing import Any

SCHEMA: dict[str, Any] = {
    "description": "Schedule trials, run besides the search: seeds trials (the study's seed, +1, ...) that train with a global batch growing by examples seen, the learning rate scaled with it: lr(B) = learning_rate * (B / B0) ** alpha, B0 the first stage's batch size. A step takes the batch of the stage the examples seen before it fall in. The report compares them with the study's best fixed batch size (steps, examples and wall time to the target). The loader also checks: stages strictly increasing in from_examples and batch_size, the first from 0, every batch divisible by the strategy's replicas.",
    "type": ["object", "null"],
    "additionalProperties": False,
    "required": ["learning_rate", "stages"],
    "properties": {
        "learning_rate": {
            "description": "The learning rate at the first stage's batch size.",
            "type": "number",
            "exclusiveMinimum": 0,
        },
        "lr_scaling": {
            "description": "How the rate scales with the batch: lr(B) = learning_rate * (B / B0) ** alpha (0.5 the square-root rule, 1 linear, 0 constant).",
            "type": ["object", "null"],
            "additionalProperties": False,
            "required": ["alpha"],
            "properties": {"alpha": {"type": "number", "default": 0.5}},
        },
        "warmup_steps": {
            "description": "Linear learning-rate warmup over the first N optimizer steps.",
            "type": ["integer", "null"],
            "minimum": 0,
            "default": 0,
        },
        "stage_warmup_steps": {
            "description": "Ramp the rate linearly from the previous stage's to a later stage's own over that stage's first N optimizer steps (0: the rate jumps at the stage change).",
            "type": ["integer", "null"],
            "minimum": 0,
            "default": 0,
        },
        "stages": {
            "description": "Ordered stages, the first from 0 examples.",
            "type": "array",
            "minItems": 1,
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["from_examples", "batch_size"],
                "properties": {
                    "from_examples": {"type": "integer", "minimum": 0},
                    "batch_size": {"type": "integer", "minimum": 1},
                },
            },
        },
        "seeds": {
            "description": "Schedule trials (training seeds: the study's seed, +1, ...).",
            "type": "integer",
            "minimum": 1,
            "default": 3,
        },
        "strategy": {
            "description": "The strategy they train on, one of search_space.strategy (default: its first).",
            "type": ["string", "null"],
        },
    },
}
