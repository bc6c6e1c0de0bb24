"""Markdown tables of benchmark results, as the README quotes them."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["table"]


def table(header: Sequence[str], rows: Iterable[Sequence[object]]) -> str:
    """A Markdown table: ``header``, the rule under it, one line per row (cells as ``str``).

    >>> print(table(["N", "trials/hour"], [[8, "1,200"]]))
    | N | trials/hour |
    |---|---|
    | 8 | 1,200 |
    """
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)
