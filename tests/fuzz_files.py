"""Hypothesis strategies for study files: mutations of every shipped study file (the examples,
search_spaces/ and benchmarks/), and the values the flag and option fuzzers share (`junk`,
`number_texts`).

A study file is drawn as bytes: a shipped file parsed, given a few structural mutations (a
value replaced by a value of another type, an extreme number, unicode, deep nesting or a raw
YAML snippet with anchors, aliases or tags; a key removed; an unknown key added; a known
optional section added; the root replaced), dumped back to YAML, then perhaps cut short,
re-encoded or given junk bytes.
"""

from __future__ import annotations

import copy
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import strategies as st

from study.extension import allocation_modes

ROOT = Path(__file__).resolve().parent.parent

#: Every study file the project ships.
SHIPPED = tuple(
    sorted(
        [*ROOT.glob("study/examples/*.yaml"), *ROOT.glob("search_spaces/*.yaml"),
         *ROOT.glob("benchmarks/*.yaml")]
    )
)  # fmt: skip

#: Optional sections with good values, added to a file so their readers are fuzzed too (the
#: allocation extension's steps where it is loaded, the core's even where not).
SECTIONS: dict[str, Any] = {
    "branch": {"batch_size": 16, "examples": 40000, "window": 4096},
    "batch_schedule": {
        "learning_rate": 0.01,
        "lr_scaling": {"alpha": 0.5},
        "stages": [
            {"from_examples": 0, "batch_size": 32},
            {"from_examples": 4096, "batch_size": 128},
        ],
        "seeds": 3,
    },
    "allocation": (
        {"mode": "steps", "steps": 20000} if "steps" in allocation_modes() else {"mode": "even"}
    ),
    "heartbeat": {"interval": 10, "grace": 60},
    "target_hold": {"fraction": 0.05, "min_steps": 5},
    "tuner": {"sampler": "grid", "confirm": {"top": 2, "seeds": 2}, "design": False},
    "storage_retry": 30,
    "overhead": 0.2,
    "noise_scale": True,
    "noise_every": 4,
    "training_seeds": "pinned",
    "eval_every": 25,
}

#: Numbers at the edges, as numbers.
EXTREMES = (0, -1, 1, 2**31, 2**63, -(2**63), 10**30, -(10**100), 0.0, -0.0, 1e-320, 1e308,
            -1e308, math.inf, -math.inf, math.nan, 0.5, 1.5)  # fmt: skip

#: Text that reads as a number, a rule's edge or a spec: where the readers parse text.
NUMBER_TEXTS = (
    "0", "-1", "1e308", "1e309", "-1e309", "nan", "NaN", "inf", "-inf", "+inf", "1_000", "0x10",
    "0o7", "1e-400", "99999999999999999999999", "-0", "1.", ".5", "1e3", "2**4", "", " ", "٣",
    "geometric", "geometric:", "geometric:0", "geometric:1", "geometric:nan", "geometric:inf",
    "geometric:-2", "mirrored:0", "mirrored:-1", "mirrored:99999999999999999999", "mirrored:x",
    "tpu", "one_device", "auto", "val_accuracy>=nan", "val_accuracy>=inf", "val_loss<-1e309",
    "val_accuracy>=", ">=0.5", "val_accuracy=>0.5", "val_accuracy>=0.5>=1", "loss<=0.1",
    "val_accuracy>=0.6 extra", "5%,5", "0%,0", "100%,1", "-5%,5", "nan%,5", "off", "5%", ",",
    "0:32", "0:32,4096:128", "0:32,0:64", "x:y", "module:callable", "os:system", "a.b:c",
    ":", "..", ".", "-", "--", "-x", "k=v", "=v", "k=", "a\nb", "tab\there", "nul\x00byte",
    "\u00e9t\u00e9", "\U0001f600", "\u202e", "\ufeff", "a" * 300,
)  # fmt: skip

#: Raw YAML put where a value goes: anchors, aliases, merge keys, tags, flow junk.
RAW_YAML = (
    "&a [1, 2]", "*undefined", "!!python/object/apply:os.system ['true']",
    "!!python/name:os.system", "!!binary aGVsbG8=", "!!set {a, b}", "!!timestamp 2001-12-14",
    "!!float nan", "!!int '12'", "!!str 12", "!custom value", "!!omap [a: 1]", "!!pairs [a: 1]",
    "{<<: {low: 1}, high: 2}", "{<<: 3}", ".inf", "-.inf", ".nan", "0x1F", "0o17", "1_000_000",
    "1e3", "1.0e+400", "~", "null", "yes", "off", "2001-12-14t21:59:43.10-05:00", "[a, [b, [c]]]",
    "{a: {b: {c: {d: 1}}}}", "'unterminated", '"\\x00"', '"\\uD800"', "[" * 300 + "]" * 300,
    "{a: " * 200 + "1" + "}" * 200, "[" * 3000 + "]" * 3000, "? [complex, key]\n  : value",
    "|\n  block\n  text", ">-\n  folded", "&x {k: *x}",
)  # fmt: skip

#: Root documents that are not a mapping of keys.
ROOTS = ("", "---\n", "~\n", "null\n", "# only a comment\n", "[]\n", "[1, 2]\n", "12\n",
         "just text\n", "--- a\n--- b\n", "---\nname: x\n---\nname: y\n", "!!set {a}\n",
         "&a [*a]\n", "\t\n", "key: [\n")  # fmt: skip


def junk(depth: int = 2) -> st.SearchStrategy[Any]:
    """A value of any type YAML can dump: None, bools, extreme and ordinary numbers, text
    (unicode, number-like), lists and mappings (``depth`` levels), dates."""
    leaves = st.one_of(
        st.none(),
        st.booleans(),
        st.sampled_from(EXTREMES),
        st.integers(),
        st.floats(allow_nan=True, allow_infinity=True),
        st.sampled_from(NUMBER_TEXTS),
        st.text(max_size=12),
        st.dates(),
    )
    if depth <= 0:
        return leaves
    return st.one_of(
        leaves,
        st.lists(junk(depth - 1), max_size=4),
        st.dictionaries(st.text(max_size=8), junk(depth - 1), max_size=3),
    )


def _positions(node: Any, path: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path to a value inside ``node`` (keys of mappings, indices of lists)."""
    found = []
    if isinstance(node, dict):
        for key, value in node.items():
            found.append((*path, key))
            found.extend(_positions(value, (*path, key)))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            found.append((*path, index))
            found.extend(_positions(value, (*path, index)))
    return found


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path[:-1]:
        doc = doc[step]
    return doc


def _nest(value: Any, depth: int) -> Any:
    for _ in range(depth):
        value = [value]
    return value


@st.composite
def study_file_bytes(draw: st.DrawFn) -> bytes:
    """A shipped study file, mutated (see the module docstring)."""
    source = draw(st.sampled_from(SHIPPED))
    if draw(st.integers(0, 40)) == 0:
        return draw(st.sampled_from(ROOTS)).encode()
    doc = copy.deepcopy(yaml.safe_load(source.read_text(encoding="utf-8")))
    raws: list[str] = []
    for _ in range(draw(st.integers(0, 3))):
        positions = _positions(doc)
        kind = draw(
            st.sampled_from(("value", "value", "drop", "unknown", "section", "nest", "raw"))
        )
        if kind == "section":
            key = draw(st.sampled_from(sorted(SECTIONS)))
            doc[key] = copy.deepcopy(SECTIONS[key])
        elif kind == "unknown":
            mappings = [()] + [p for p in positions if isinstance(_at(doc, p), dict)]
            where = _at(doc, draw(st.sampled_from(mappings)))
            where[draw(st.text(max_size=10))] = draw(junk(1))
        elif positions:
            path = draw(st.sampled_from(positions))
            parent = _parent(doc, path)
            if kind == "drop":
                del parent[path[-1]]
            elif kind == "nest":
                parent[path[-1]] = _nest(parent[path[-1]], draw(st.integers(1, 60)))
            elif kind == "raw":
                raws.append(draw(st.sampled_from(RAW_YAML)))
                parent[path[-1]] = f"@@raw{len(raws) - 1}@@"
            else:
                parent[path[-1]] = draw(junk())
    try:
        text = yaml.safe_dump(doc, sort_keys=False, allow_unicode=True, width=1000)
    except RecursionError:  # nested past what the dumper takes: the nesting as raw text
        text = "name: x\nsearch_space: " + "[" * 3000 + "]" * 3000 + "\n"
    for i, raw in enumerate(raws):
        text = text.replace(f"'@@raw{i}@@'", raw.replace("\n", " ") if "\n" in raw else raw)
    return _encode(draw, text)


def _at(doc: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        doc = doc[step]
    return doc


def _encode(draw: st.DrawFn, text: str) -> bytes:
    """The text as bytes: UTF-8 mostly; else cut short, another encoding, or junk bytes in it."""
    how = draw(st.sampled_from(("utf-8",) * 6 + ("cut", "utf-16", "latin-1", "bom", "bytes")))
    if how == "cut":
        return text.encode()[: draw(st.integers(0, max(0, len(text.encode()) - 1)))]
    if how == "utf-16":
        return text.encode("utf-16")
    if how == "latin-1":
        return (text + "comment: caf\u00e9\n").encode("latin-1", errors="replace")
    if how == "bom":
        return b"\xef\xbb\xbf" + text.encode()
    if how == "bytes":
        data = text.encode()
        at = draw(st.integers(0, len(data)))
        return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:]
    return text.encode()
