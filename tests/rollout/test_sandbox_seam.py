"""Rollout reaches sandboxes through the sandbox room's interface only: it imports `openforge.sandbox` and
nothing below it (no backend module, not the local jail), and never asks which backend it has (no backend
name compared, no `isinstance` against a provider or sandbox class, no `builds_images`): the Dockerfile replay
and the agent's user are the backend's (`Sandbox.setup_environment`, `SandboxProvider.spec_user`)."""

from __future__ import annotations

import ast
from pathlib import Path

from support.paths import REPO

ROLLOUT = REPO / "openforge" / "rollout"
BACKENDS = {"docker", "local", "kubernetes", "k8s"}
BACKEND_CLASSES = {
    "DockerProvider",
    "LocalProvider",
    "KubernetesProvider",
    "DockerSandbox",
    "LocalSandbox",
    "KubernetesSandbox",
}


def backend_branches(path: Path) -> list[str]:
    """Where a module reaches past the sandbox interface or branches on the backend: `line: what`."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        modules = []
        if isinstance(node, ast.ImportFrom) and node.module:
            modules = [node.module]
        elif isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        found += [f"{node.lineno}: imports {m}" for m in modules if m.startswith("openforge.sandbox.")]
        if isinstance(node, ast.Attribute) and node.attr == "builds_images":
            found.append(f"{node.lineno}: reads builds_images")
        if isinstance(node, ast.Name) and node.id in BACKEND_CLASSES:
            found.append(f"{node.lineno}: names {node.id}")
        if isinstance(node, ast.Compare):
            for side in [node.left, *node.comparators]:
                if isinstance(side, ast.Constant) and side.value in BACKENDS:
                    found.append(f"{node.lineno}: compares with {side.value!r}")
    return found


def test_rollout_uses_only_the_sandbox_interface():
    found = {path.name: backend_branches(path) for path in sorted(ROLLOUT.glob("*.py"))}
    assert {name: where for name, where in found.items() if where} == {}


def test_the_check_finds_a_backend_branch(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from openforge.sandbox.local.jail import run_jailed\n"
        "def setup(provider, sb):\n"
        "    if provider.builds_images or provider.name == 'local':\n"
        "        return isinstance(sb, LocalSandbox)\n"
    )
    assert backend_branches(planted) == [
        "1: imports openforge.sandbox.local.jail",
        "3: reads builds_images",
        "3: compares with 'local'",
        "4: names LocalSandbox",
    ]
