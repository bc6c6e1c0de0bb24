"""Extensions: the features that live outside the core and register what they add to it.

The core runs a study, reads its answer and reports it. A feature beside that is an `Extension`
in a package of its own under `study.ext` (a third party's: an entry of the
``study.extensions`` entry point group), registered with `register` when imported; the core
imports none of them and asks `loaded`. What one may add, each an optional method (by default
nothing) beside the core's function that asks the loaded extensions:

- commands (`Extension.add_commands`);
- top-level study-file keys (`Extension.sections`, `study_sections`; without the extension such
  a key is one line and exit status 2 naming it: `needs`), report sections
  (`report_sections`), trials besides the search (`trial_sources`) and methods of
  `study.Study` (`study_method`);
- allocation modes besides the core's ``even`` (`Extension.allocation_modes`,
  `allocation_modes`, `provider`);
- storage URL schemes and the flags that go with ``--storage`` (`Extension.storage_schemes`,
  `Extension.add_storage_flags`; `storage_opener`, `storage_environment`).

``STUDY_EXTENSIONS`` chooses which load: unset, all; ``none``, the core alone; or a comma list
of names (``allocation``, ``batch_science``, ``branch``, ``schedules``, ``storage_proxy``).

Example::

    @register
    class Mine(Extension):
        name = "mine"
        summary = "what it adds"

        def add_commands(self, sub, lazy):
            p = sub.add_parser("mine", help=self.summary)
            p.set_defaults(handler=lazy("my_package.command", "main"))
"""

from __future__ import annotations

import abc
import argparse
import enum
import importlib
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any, ClassVar

from study.errors import FieldError, UsageError

__all__ = [
    "BUILTIN",
    "ENTRY_POINTS",
    "EXTENSIONS_ENV",
    "Block",
    "Extension",
    "Handler",
    "Lazy",
    "Place",
    "ReportFigure",
    "ReportSection",
    "Section",
    "StorageOpener",
    "TrialSource",
    "declaring",
    "loaded",
    "needs",
    "register",
    "report_sections",
    "storage_environment",
    "storage_extensions",
    "storage_opener",
    "study_method",
    "study_sections",
    "trial_sources",
]
# The allocation modes (the block at the end of the module):
__all__ += ["AllocationModeSpec", "allocation_modes", "provider"]

ENTRY_POINTS = "study.extensions"
"""The entry point group a third-party package names its extension module in."""

EXTENSIONS_ENV = "STUDY_EXTENSIONS"
"""Which extensions load: unset (all), ``none`` or a comma list of names."""

BUILTIN: dict[str, str] = {
    "batch_science": "study.ext.batch_science",
    "allocation": "study.ext.allocation",
    "storage_proxy": "study.ext.storage_proxy",
    "branch": "study.ext.branch",
    "schedules": "study.ext.schedules",
}
"""The extensions that ship with ``study``: name to module."""

Handler = Callable[[argparse.Namespace], int]
Lazy = Callable[..., Handler]
"""``lazy(module, attr, trains=False)``: a command handler that imports ``module`` when run."""
StorageOpener = Callable[[str, float, Callable[[], float]], Any]
"""``opener(url, window, now)``: the Optuna storage at ``url``, retried for ``window`` seconds
through transient faults, heartbeats judged by the clock ``now`` (`study.ledger.open_storage`)."""


class Extension(abc.ABC):
    """A feature outside the core: its ``name`` (unique), a one-line ``summary``, and what it
    adds (none of it by default)."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def add_commands(self, sub: Any, lazy: Lazy) -> None:  # noqa: B027 - optional hook
        """Add this extension's subcommands to the CLI's ``sub`` (argparse subparsers); their
        handlers come from ``lazy`` so that nothing heavy is imported to parse arguments."""

    # -- allocation modes (see the block at the end of the module) --------------------------
    def allocation_modes(self) -> Mapping[str, AllocationModeSpec]:
        """The allocation modes this extension adds (``allocation: {mode: NAME}``), by name."""
        return {}

    # -- storages: URL schemes, and the flags that go with --storage (storage_proxy) --------
    storage_urls: ClassVar[str] = ""
    """The storage URLs `storage_schemes` opens, for ``--storage``'s help (``grpc://HOST:PORT
    ...``); empty: none."""

    def storage_schemes(self) -> Mapping[str, StorageOpener]:
        """URL schemes (lower case, no ``://``) whose storages this extension opens, each with
        its `StorageOpener` (which imports what it needs when called)."""
        return {}

    def add_storage_flags(self, p: argparse.ArgumentParser) -> None:  # noqa: B027 - optional
        """Add flags to a core command's parser ``p`` where the core adds its storage flags
        (after ``--storage-retry``); `storage_environment` hands their values on."""

    def storage_environment(self, args: argparse.Namespace) -> Mapping[str, str | None]:
        """Environment variables (None: unset) the command runs with, from the flags of
        `add_storage_flags` in ``args``: how their values reach the opener, and the command's
        child processes."""
        return {}

    # -- study-file sections, report sections, trial sources, Study methods -----------------
    # (each optional: the default adds nothing; the core asks `study_sections`,
    # `report_sections`, `trial_sources` and `study_method` below)

    def sections(self) -> Sequence[Section]:
        """The top-level study-file keys this extension reads (`Section`)."""
        return ()

    def report_sections(self) -> Sequence[ReportSection]:
        """What this extension adds to the scaling report (`ReportSection`)."""
        return ()

    def trial_sources(self, config: Any) -> Sequence[TrialSource]:
        """Trials this extension runs for the study ``config`` besides its search
        (`TrialSource`; ``study run`` and ``study worker`` run them)."""
        return ()

    def study_methods(self) -> Mapping[str, Callable[..., Any]]:
        """Methods this extension adds to `study.Study`: name to ``function(study, ...)``."""
        return {}


_REGISTERED: dict[str, Extension] = {}


def register(cls: type[Extension]) -> type[Extension]:
    """Class decorator: register one instance of ``cls`` under ``cls.name``.

    Raises:
        ValueError: when another extension already has that name.
    """
    held = _REGISTERED.get(cls.name)
    if held is not None and type(held) is not cls:
        raise ValueError(f"two extensions are named {cls.name!r}: {type(held)} and {cls}")
    _REGISTERED[cls.name] = cls()
    return cls


def loaded() -> tuple[Extension, ...]:
    """The extensions `EXTENSIONS_ENV` asks for, built-in and entry-point ones, imported, in
    that order (`BUILTIN`'s, then the entry points').

    Raises:
        UsageError: naming the known extensions, for a name in `EXTENSIONS_ENV` no extension
            has.
    """
    wanted = _wanted()
    for name, module in BUILTIN.items():
        if wanted is None or name in wanted:
            importlib.import_module(module)
    entries = metadata.entry_points(group=ENTRY_POINTS)
    for entry in entries:
        if wanted is None or entry.name in wanted:
            importlib.import_module(entry.value)
    unknown = sorted(set(wanted or ()) - set(_REGISTERED))
    if unknown:
        known = ", ".join(sorted(_REGISTERED)) or "none"
        raise UsageError(
            f"{EXTENSIONS_ENV}: no extension named {', '.join(unknown)} (known: {known}); "
            "use none, or a comma list of known names"
        )
    chosen = [e for n, e in _REGISTERED.items() if wanted is None or n in wanted]
    order = [*BUILTIN, *(entry.name for entry in entries)]  # not the order they were imported in
    return tuple(
        sorted(chosen, key=lambda e: order.index(e.name) if e.name in order else len(order))
    )


def _wanted() -> set[str] | None:
    value = os.environ.get(EXTENSIONS_ENV, "").strip()
    if not value:
        return None
    if value.lower() == "none":
        return set()
    return {part.strip() for part in value.split(",") if part.strip()}


# -- allocation modes: ``allocation: {mode: NAME}`` beside the core's even ------------------


@dataclass(frozen=True)
class AllocationModeSpec:
    """An allocation mode an extension adds: its allocator, a subclass of
    `study.runner.allocator.Allocator` named ``module:Class`` (imported only when a study runs
    with it: it may be heavy, and a study file is read by every command), and whether it
    spends a budget of training steps (``allocation.steps``: then required with it, and
    refused by the modes that do not).

    Example: ``AllocationModeSpec("my_package.allocators:Greedy", spends_steps=True)``.
    """

    allocator: str
    spends_steps: bool = False


def allocation_modes() -> dict[str, AllocationModeSpec]:
    """The allocation modes of the loaded extensions, by name, in the order they load.

    Raises:
        ValueError: when two extensions add a mode of the same name.
    """
    modes: dict[str, AllocationModeSpec] = {}
    owners: dict[str, str] = {}
    for extension in loaded():
        for name, spec in extension.allocation_modes().items():
            if name in modes:
                raise ValueError(
                    f"two extensions add the allocation mode {name!r}: {owners[name]} and "
                    f"{extension.name}"
                )
            modes[name], owners[name] = spec, extension.name
    return modes


def provider(adds: Callable[[Extension], Iterable[str]], name: str) -> str | None:
    """The installed extension, loaded or not, that adds ``name`` (``adds``: what one extension
    adds, e.g. ``lambda e: e.allocation_modes()``), or None. Every installed extension is
    imported to ask (an error message's question: `loaded` still gives only those
    `EXTENSIONS_ENV` asks for)."""
    for module in BUILTIN.values():
        importlib.import_module(module)
    for entry in metadata.entry_points(group=ENTRY_POINTS):
        importlib.import_module(entry.value)
    return next((n for n, e in _REGISTERED.items() if name in adds(e)), None)


# -- storages: the core's side of the storage hooks (`study.ledger.open_storage`, the CLI) ------
_STORAGE_CACHE: dict[tuple[str, tuple[str, ...]], tuple[Extension, ...]] = {}


def storage_extensions() -> tuple[Extension, ...]:
    """`loaded`, remembered for this value of `EXTENSIONS_ENV` and these registered extensions
    (each command's parser asks once per storage flag; `loaded` reads the entry points)."""
    key = (os.environ.get(EXTENSIONS_ENV, ""), tuple(_REGISTERED))
    if key not in _STORAGE_CACHE:
        found = loaded()
        _STORAGE_CACHE[(key[0], tuple(_REGISTERED))] = found
        return found
    return _STORAGE_CACHE[key]


def storage_opener(url: str) -> StorageOpener | None:
    """The opener a loaded extension has for ``url``'s scheme; None where no extension has one
    (the core opens it).

    Raises:
        FieldError: on ``storage``: an extension that is not loaded opens such URLs (one line
            naming it and how to load it).
    """
    scheme = url.partition("://")[0].lower() if "://" in url else ""
    if not scheme:
        return None
    for extension in storage_extensions():
        opener = extension.storage_schemes().get(scheme)
        if opener is not None:
            return opener
    for module in BUILTIN.values():  # not loaded: which one it is, to say so
        importlib.import_module(module)
    for name, extension in _REGISTERED.items():
        if scheme in extension.storage_schemes():
            raise FieldError("storage", detail=needs(repr(url), name))
    return None


def storage_environment(args: argparse.Namespace) -> dict[str, str | None]:
    """The environment the loaded extensions' storage flags in ``args`` ask for."""
    values: dict[str, str | None] = {}
    for extension in storage_extensions():
        values.update(extension.storage_environment(args))
    return values


# --------------------------------------------------------------------------------------------
# Study-file sections, report sections, trial sources and Study methods: what an extension
# declares (`Extension.sections`, ...) and the functions the core asks (`study_sections`, ...)


@dataclass(frozen=True)
class Section:
    """A top-level study-file key an extension reads.

    ``read(reader, value, config)`` turns the key's YAML ``value`` (never None: a key left out
    or null is no section) into a frozen dataclass; ``reader`` (`study.config.yaml_reader.Reader`)
    names the file in its errors, ``config`` is the study as the core read it (`StudyConfig`,
    without the sections). ``schema`` is the key's JSON-schema fragment: `docs/generate.py`
    writes it into ``study/config/study.schema.json``, which documents the key.
    """

    key: str
    read: Callable[[Any, Any, Any], Any]
    schema: Mapping[str, Any] = field(default_factory=dict)


class Place(str, enum.Enum):
    """Where a report section stands among the core's: after the cross-check (before the
    answer across targets), or after that answer, before the tables."""

    AFTER_CROSS_CHECK = "after_cross_check"
    BEFORE_TABLES = "before_tables"


@dataclass(frozen=True)
class Block:
    """One part of a report section: bullet ``lines``, ``tables`` (`study.report.tables.Table`;
    in report.md under "Tables") and preformatted ``code`` (a snippet)."""

    lines: Sequence[str] = ()
    tables: Sequence[Any] = ()
    code: str = ""


@dataclass(frozen=True)
class ReportFigure:
    """A figure of a report section: ``name`` (its file stem, and ``fit.plot.NAME``),
    ``caption``, ``draw(ax, value)`` into a matplotlib Axes, ``drawable(value)`` whether the
    section's value has something to draw, and the ``size`` of a new figure (inches)."""

    name: str
    caption: str
    draw: Callable[[Any, Any], Any]
    drawable: Callable[[Any], bool]
    size: tuple[float, float] = (6.8, 4.4)


@dataclass(frozen=True)
class ReportSection:
    """What an extension adds to the scaling report, read from the stored study.

    ``build(ledger, config, report)`` makes the section's value (None: nothing) from the
    study's `Ledger`, its `StudyConfig` (None for an imported study) and the `ScalingReport`;
    ``report.section(key)`` then holds it. ``to_json(value)`` is report.json's ``key`` (the
    value may be None); ``blocks(value)`` is what report.html (and report.md, with
    ``markdown``) shows under the heading ``title`` (none: no section), at ``place``, in an
    HTML section with id ``anchor``; ``figures`` are drawn with the report's.
    """

    key: str
    title: str
    anchor: str
    build: Callable[[Any, Any, Any], Any]
    to_json: Callable[[Any], Any]
    blocks: Callable[[Any], Sequence[Block]]
    place: Place = Place.BEFORE_TABLES
    figures: Sequence[ReportFigure] = ()
    markdown: bool = True


@dataclass(frozen=True)
class TrialSource:
    """Trials an extension runs for a study besides its search. ``check`` is a `TrialSpec`
    the run checks before it records anything (None: none); ``run(ledger, tracker, pool,
    workers=N, live=...)`` runs the trials still to run once the search's budget is spent and
    returns the exit status (0: the run goes on)."""

    name: str
    check: Any
    run: Callable[..., int]


_SECTIONS: dict[tuple[str, tuple[Extension, ...]], tuple[Section, ...]] = {}


def study_sections() -> tuple[Section, ...]:
    """The study-file sections of the loaded extensions, in their order."""
    key = (os.environ.get(EXTENSIONS_ENV, ""), tuple(_REGISTERED.values()))
    if key not in _SECTIONS:  # loaded() reads the entry points: once per choice
        _SECTIONS[key] = tuple(s for e in loaded() for s in e.sections())
    return _SECTIONS[key]


def report_sections() -> tuple[ReportSection, ...]:
    """The report sections of the loaded extensions, in their order."""
    return tuple(s for e in loaded() for s in e.report_sections())


def trial_sources(config: Any) -> tuple[TrialSource, ...]:
    """The trials the loaded extensions run for the study ``config`` besides its search."""
    return tuple(t for e in loaded() for t in e.trial_sources(config))


def study_method(name: str) -> Callable[..., Any] | None:
    """The `study.Study` method ``name`` a loaded extension adds (None: none does)."""
    return next((e.study_methods()[name] for e in loaded() if name in e.study_methods()), None)


def declaring(*, section: str | None = None, method: str | None = None) -> str | None:
    """The name of an extension, loaded or not, that reads the study-file key ``section`` or
    adds the `study.Study` method ``method`` (None: none that is installed does)."""
    for module in BUILTIN.values():
        importlib.import_module(module)
    for entry in metadata.entry_points(group=ENTRY_POINTS):
        try:
            importlib.import_module(entry.value)
        except ImportError:  # a broken third-party package declares nothing
            continue
    for name, extension in _REGISTERED.items():
        if section is not None and section in {s.key for s in extension.sections()}:
            return name
        if method is not None and method in extension.study_methods():
            return name
    return None


def needs(what: str, name: str) -> str:
    """The one line that says ``what`` needs the extension ``name`` and how to load it."""
    return f"{what} needs the extension {name!r} (unset {EXTENSIONS_ENV} or add {name} to it)"
