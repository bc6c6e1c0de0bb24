"""Typed, validated inputs: targets, trial specifications and study files."""
