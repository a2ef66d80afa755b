"""Harness adapters: how to configure and launch each harness headless against a proxy URL + episode key,
and the bundle of pinned harness binaries they run from.

    from openforge.harness import get_adapter, install_harnesses

    install_harnesses()                                   # -> {"claude-code": "2.1.197", ...}
    adapter = get_adapter("codex")
    launch = adapter.launch(bundle_root, home, workdir, base_url, key, model, instruction)
    # launch.argv / launch.env / launch.files / launch.cwd: run it (stdin /dev/null), then
    adapter.parse_transcript(stdout)

`ADAPTERS` maps each harness name to its adapter class. It is filled from the modules of this package: adding
a harness is one small file defining a `HarnessAdapter` subclass with a `name`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

from openforge.harness.base import (
    DIALECTS,
    HarnessAdapter,
    HarnessError,
    Launch,
    LocalResult,
    UnknownHarnessError,
    run_local,
)
from openforge.harness.bundle import (
    ALL_HARNESSES,
    PINNED,
    BundleError,
    BundleSetupError,
    bundle_status,
    default_bundle_dir,
    install_harnesses,
    pinned_versions,
    read_manifest,
)

_NOT_ADAPTERS = {"base", "bundle", "smoke", "stub_api", "react_agent", "tools"}


def _discover() -> dict[str, type[HarnessAdapter]]:
    found: dict[str, type[HarnessAdapter]] = {}
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda i: i.name):
        if info.name in _NOT_ADAPTERS or info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        for _, obj in inspect.getmembers(module, inspect.isclass):
            if (issubclass(obj, HarnessAdapter) and obj is not HarnessAdapter and obj.name
                    and not inspect.isabstract(obj) and obj.__module__ == module.__name__):
                if obj.name in found and found[obj.name] is not obj:
                    raise HarnessError(f"two adapters are named {obj.name!r}: {found[obj.name]} and {obj}")
                if obj.dialect not in DIALECTS:
                    raise HarnessError(f"adapter {obj.name!r} speaks unknown dialect {obj.dialect!r}; "
                                       f"known: {', '.join(DIALECTS)}")
                found[obj.name] = obj
    return found


ADAPTERS: dict[str, type[HarnessAdapter]] = _discover()


def check_harness_names(names: list[str]) -> list[str]:
    """`names` without repeats, in order; ValueError naming the unknown ones and the known ones (for config
    validators)."""
    unknown = [h for h in names if h not in ADAPTERS]
    if unknown:
        raise ValueError(f"unknown harness(es) {', '.join(unknown)}; known: {', '.join(sorted(ADAPTERS))}")
    return list(dict.fromkeys(names))


def get_adapter(name: str, **options) -> HarnessAdapter:
    """An adapter instance for harness `name`, with `options` (its dataclass fields, e.g. `tools=...`)."""
    cls = ADAPTERS.get(name)
    if cls is None:
        known = ", ".join(sorted(ADAPTERS)) or "(none)"
        raise UnknownHarnessError(f"unknown harness {name!r}; known harnesses: {known}")
    try:
        return cls(**options)
    except TypeError as e:
        raise HarnessError(f"bad options for harness {name!r}: {e}") from None


def harness_versions(bundle_dir: Path | str | None = None) -> list[tuple[str, str, str, str]]:
    """(harness, dialect, pinned version, installed version) of every harness, by name; "built in" for one
    that needs no install (react), "-" for one not installed (`openforge harness list`)."""
    installed, pinned = bundle_status(bundle_dir), pinned_versions()
    rows = []
    for name, adapter in sorted(ADAPTERS.items()):
        if adapter.component:
            rows.append((name, adapter.dialect, str(pinned.get(adapter.component, "-")),
                         str(installed.get(name) or "-")))
        else:
            rows.append((name, adapter.dialect, "built in", "built in"))
    return rows


__all__ = [
    "ADAPTERS",
    "ALL_HARNESSES",
    "DIALECTS",
    "PINNED",
    "BundleError",
    "BundleSetupError",
    "HarnessAdapter",
    "HarnessError",
    "Launch",
    "LocalResult",
    "UnknownHarnessError",
    "bundle_status",
    "check_harness_names",
    "default_bundle_dir",
    "get_adapter",
    "harness_versions",
    "install_harnesses",
    "read_manifest",
    "run_local",
]
