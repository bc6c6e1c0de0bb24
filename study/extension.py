"""Extensions: the features that live outside the core and register what they add to it.

The core runs a study, reads its answer and reports it. A feature beside that (importing another
tool's measurements, ...) is an `Extension` in a package of its own under `study.ext`, the way a
workload is a module of its own: it registers itself with `register` when imported and adds its
commands to the CLI's parser (`Extension.add_commands`). The core imports no extension; it asks
`loaded` for them. Third-party packages add extensions through the ``study.extensions`` entry
point group (each entry a module that registers its extension on import).

An extension may also add allocation modes (``allocation: {mode: NAME}`` besides the core's
``even``; `Extension.allocation_modes`): the study file's reader takes the loaded ones
(`allocation_modes`), and names the extension of a mode that is not loaded (`provider`,
`needs_extension`).

``STUDY_EXTENSIONS`` chooses which load: unset, all; ``none``, the core alone; or a comma list
of names (``allocation``, ``batch_science``). The core's tests run with ``none`` as well as with
all.

Storages: an extension may open storage URLs of its own schemes (`Extension.storage_schemes`;
`study.ledger.open_storage` asks `storage_opener`) and add the flags that go with ``--storage``
(`Extension.add_storage_flags`, their values handed on as environment variables:
`storage_environment`).

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
import importlib
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib import metadata
from typing import Any, ClassVar

from study.errors import FieldError, UsageError

__all__ = [
    "BUILTIN",
    "ENTRY_POINTS",
    "EXTENSIONS_ENV",
    "Extension",
    "Handler",
    "Lazy",
    "StorageOpener",
    "loaded",
    "register",
    "storage_environment",
    "storage_extensions",
    "storage_opener",
]
# The allocation modes (the block at the end of the module):
__all__ += ["AllocationModeSpec", "allocation_modes", "needs_extension", "provider"]

ENTRY_POINTS = "study.extensions"
"""The entry point group a third-party package names its extension module in."""

EXTENSIONS_ENV = "STUDY_EXTENSIONS"
"""Which extensions load: unset (all), ``none`` or a comma list of names."""

BUILTIN: dict[str, str] = {
    "batch_science": "study.ext.batch_science",
    "allocation": "study.ext.allocation",
    "storage_proxy": "study.ext.storage_proxy",
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
    """The extensions `EXTENSIONS_ENV` asks for, built-in and entry-point ones, imported.

    Raises:
        UsageError: naming the known extensions, for a name in `EXTENSIONS_ENV` no extension
            has.
    """
    wanted = _wanted()
    for name, module in BUILTIN.items():
        if wanted is None or name in wanted:
            importlib.import_module(module)
    for entry in metadata.entry_points(group=ENTRY_POINTS):
        if wanted is None or entry.name in wanted:
            importlib.import_module(entry.value)
    unknown = sorted(set(wanted or ()) - set(_REGISTERED))
    if unknown:
        known = ", ".join(sorted(_REGISTERED)) or "none"
        raise UsageError(
            f"{EXTENSIONS_ENV}: no extension named {', '.join(unknown)} (known: {known}); "
            "use none, or a comma list of known names"
        )
    return tuple(e for n, e in _REGISTERED.items() if wanted is None or n in wanted)


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


def needs_extension(what: str, extension: str) -> str:
    """The message for a feature of an extension that is not loaded.

    Example: ``needs_extension("allocation.mode 'steps'", "allocation")`` is ``allocation.mode
    'steps' needs the extension 'allocation' (unset STUDY_EXTENSIONS or add allocation to it)``.
    """
    return (
        f"{what} needs the extension {extension!r} (unset {EXTENSIONS_ENV} or add {extension} "
        "to it)"
    )


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
            raise FieldError(
                "storage",
                detail=f"{url!r} needs the extension {name!r} (unset {EXTENSIONS_ENV} or add "
                f"{name} to it)",
            )
    return None


def storage_environment(args: argparse.Namespace) -> dict[str, str | None]:
    """The environment the loaded extensions' storage flags in ``args`` ask for."""
    values: dict[str, str | None] = {}
    for extension in storage_extensions():
        values.update(extension.storage_environment(args))
    return values
