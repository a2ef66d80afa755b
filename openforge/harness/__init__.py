"""Harness adapters: how to configure and launch each harness headless against a proxy URL + episode key,
and the bundle of pinned harness binaries they run from.

    from openforge.harness import get_adapter, install_harnesses

    install_harnesses()                                   # -> {"claude-code": "2.1.197", ...}
    adapter = get_adapter("codex")
    launch = adapter.launch(LaunchContext(bundle_root, home, workdir, base_url, key, model, instruction))
    # launch.argv / launch.env / launch.files / launch.cwd: run it (stdin /dev/null), then
    adapter.parse_transcript(stdout)

`ADAPTERS` maps each harness name to its adapter class: the registry below, one line per adapter. Adding a
harness is one small file defining a `HarnessAdapter` subclass with a `name` and a `dialect`, and its line here
(tests/harness/test_adapters.py fails for an adapter module whose adapter is not registered).
"""

from __future__ import annotations

from pathlib import Path

from openforge.harness.base import (
    DIALECTS,
    HarnessAdapter,
    HarnessError,
    Launch,
    LaunchContext,
    LocalResult,
    UnknownHarnessError,
    adapter_table,
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
from openforge.harness.claude_code import ClaudeCodeAdapter
from openforge.harness.codex import CodexAdapter
from openforge.harness.computer_use import ComputerUseAdapter
from openforge.harness.openclaw import OpenClawAdapter
from openforge.harness.react import ReactAdapter

#: The harness registry: name → adapter class.
ADAPTERS: dict[str, type[HarnessAdapter]] = adapter_table(
    ClaudeCodeAdapter, CodexAdapter, ComputerUseAdapter, OpenClawAdapter, ReactAdapter
)


def check_harness_names(names: list[str]) -> list[str]:
    """`names` without repeats, in order; ValueError naming the unknown ones and the known ones (for config
    validators)."""
    unknown = [h for h in names if h not in ADAPTERS]
    if unknown:
        raise ValueError(f"unknown harness(es) {', '.join(unknown)}; known: {', '.join(sorted(ADAPTERS))}")
    return list(dict.fromkeys(names))


def get_adapter(name: str, **options: object) -> HarnessAdapter:
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
    that needs no install (react, computer-use), "-" for one not installed (`openforge harness list`)."""
    installed, pinned = bundle_status(bundle_dir), pinned_versions()
    rows = []
    for name, adapter in sorted(ADAPTERS.items()):
        if adapter.component:
            rows.append(
                (name, adapter.dialect, str(pinned.get(adapter.component, "-")), str(installed.get(name) or "-"))
            )
        else:
            rows.append((name, adapter.dialect, "built in", "built in"))
    return rows


__all__ = [
    "ADAPTERS",
    "ALL_HARNESSES",
    "ClaudeCodeAdapter",
    "CodexAdapter",
    "ComputerUseAdapter",
    "DIALECTS",
    "PINNED",
    "BundleError",
    "BundleSetupError",
    "HarnessAdapter",
    "HarnessError",
    "Launch",
    "LaunchContext",
    "LocalResult",
    "OpenClawAdapter",
    "ReactAdapter",
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
