"""Reading a parsed YAML document key by key: every failure is one `UsageError` line naming the
file, the key path, the rule and the value; and a YAML loader that rejects duplicate keys.

Example: ``Reader("s.yaml").integer(0, "budget.max_steps", minimum=1)`` raises
``s.yaml: budget.max_steps must be >= 1 (got 0)``.
"""

from __future__ import annotations

import contextlib
import difflib
import math
import re
from collections.abc import Callable, Hashable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, NoReturn

import yaml

from study.config.rules import FieldError, check, show
from study.errors import UsageError


class Reader:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, path: str, rule: str, value: Any = ..., *, got: str | None = None) -> NoReturn:
        """Raise ``SOURCE: PATH RULE (got VALUE)``; ``got`` replaces the shown value."""
        where = f"{path} " if path else ""
        if got is None and value is not ...:
            got = show(value)
        tail = f" (got {got})" if got is not None else ""
        raise UsageError(f"{self.source}: {where}{rule}{tail}")

    @contextlib.contextmanager
    def naming(self, key: str | Callable[[str], str]) -> Iterator[None]:
        """Rename a data-model `FieldError` raised inside to ``SOURCE: KEY``.

        ``key`` is the file's key, or a function from the error's field to it.
        """
        try:
            yield
        except FieldError as err:
            path = key(err.field) if callable(key) else key
            raise err.named(f"{self.source}: {path}") from None

    def mapping(self, value: Any, path: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            self.fail(path, "must be a mapping", value)
        return value

    def keys(
        self, value: Any, path: str, known: Sequence[str], required: Sequence[str]
    ) -> Mapping[str, Any]:
        """Check ``value`` is a mapping with only ``known`` keys and all ``required`` ones."""
        where = f"in {path}" if path else "at top level"
        mapping = self.mapping(value, path) if path else value
        for key in mapping:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean {close[0]!r}? " if close else ""
                raise UsageError(
                    f"{self.source}: unknown key {key!r} {where} ({hint}known: {', '.join(known)})"
                )
        for key in required:
            if mapping.get(key) is None:
                raise UsageError(f"{self.source}: missing required key {key!r} {where}")
        return mapping

    def string(
        self, value: Any, path: str, *, pattern: re.Pattern[str] | None = None, rule: str = ""
    ) -> str:
        if not isinstance(value, str) or not value.strip():
            self.fail(path, "must be a non-empty string", value)
        if pattern is not None and not pattern.match(value):
            self.fail(path, f"must be {rule}", value)
        return value

    def choice(self, value: Any, path: str, choices: Sequence[str]) -> str:
        if value not in choices:
            self.fail(path, f"must be one of {', '.join(choices)}", value)
        return value

    def integer(self, value: Any, path: str, *, rule: str | None = None) -> int:
        """An int (not a bool), obeying the interval ``rule`` if given (see `check`)."""
        if isinstance(value, bool) or not isinstance(value, int):
            hint = (
                "; write a whole number without a decimal point" if isinstance(value, float) else ""
            )
            self.fail(path, f"must be an integer{hint}", value)
        if rule is not None:
            with self.naming(path):
                check(path, value, rule)
        return value

    def number(self, value: Any, path: str) -> float:
        """A finite int or float (not a bool); the data model checks its interval."""
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            hint = ""
            if isinstance(value, str) and _looks_numeric(value):
                hint = f"; YAML reads {value} as text, write it with a decimal point (e.g. 1.0e-3)"
            self.fail(path, f"must be a number{hint}", value)
        if not math.isfinite(value):
            self.fail(path, "must be finite", value)
        return value


def _looks_numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def kind(value: Any) -> str:
    if value is None:
        return "an empty document"
    if isinstance(value, list):
        return "a list"
    return f"{type(value).__name__} {show(value)}"


class StrictLoader(yaml.SafeLoader):
    """A safe loader that rejects duplicate keys (PyYAML keeps the last one silently), and
    whose tagged values that do not convert (``!!int x``, ``!!bool maybe``, ``!!timestamp
    x``) are YAML errors at their line: PyYAML's constructors raise `ValueError`,
    `IndexError`, `KeyError` or `AttributeError` for them."""

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep=deep)
        except (ValueError, IndexError, KeyError, AttributeError, TypeError, OverflowError) as exc:
            tag = node.tag.removeprefix("tag:yaml.org,2002:")
            value = node.value if isinstance(node, yaml.ScalarNode) else "..."
            raise yaml.constructor.ConstructorError(
                None, None, f"!!{tag} {value!r} is not a {tag} ({type(exc).__name__}); fix the "
                "value or drop the tag", node.start_mark,
            ) from None  # fmt: skip


def _construct_mapping(loader: StrictLoader, node: yaml.MappingNode, deep: bool = False) -> dict:
    loader.flatten_mapping(node)
    seen: set[Any] = set()
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=deep)
        if not isinstance(key, Hashable):
            continue  # construct_mapping reports unhashable keys
        if key in seen:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark
            )
        seen.add(key)
    return loader.construct_mapping(node, deep=deep)


StrictLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def yaml_message(source: str, exc: yaml.YAMLError) -> str:
    """``SOURCE: line L, column C: invalid YAML: PROBLEM (CONTEXT at line L0)`` on one line."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None) or str(exc)
    where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context and context_mark is not None and mark is not None and context_mark.line != mark.line:
        problem = f"{problem} ({context} at line {context_mark.line + 1})"
    problem = " ".join(str(problem).split())
    return f"{source}: {where}invalid YAML: {problem}"


def load_yaml_file(path: Path, source: str) -> tuple[Any, str]:
    """A YAML file's document and its text, each way it cannot be read one `UsageError` line
    naming ``source``: unreadable (the system's reason), not UTF-8 (the first bad byte's
    offset), invalid YAML (`yaml_message`), or nested deeper than the parser goes."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UsageError(f"{source}: cannot read the file ({exc.strerror or exc})") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise UsageError(
            f"{source}: not UTF-8 text (byte {exc.start} is {data[exc.start : exc.start + 1]!r}); "
            "save the file as UTF-8"
        ) from None
    try:
        return yaml.load(text, Loader=StrictLoader), text  # a SafeLoader subclass
    except yaml.YAMLError as exc:
        raise UsageError(yaml_message(source, exc)) from None
    except RecursionError:
        raise UsageError(
            f"{source}: invalid YAML: nested too deeply for the parser; a study file needs a "
            "few levels of nesting"
        ) from None
