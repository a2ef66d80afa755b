"""Every exception class OpenForge defines joins the error tree (`openforge.core.errors`): found by importing
every module of the package, plus an AST scan for classes defined inside functions; each public one has a kind
and a line in docs/design.md's "Errors"."""

from __future__ import annotations

import ast
import builtins
import importlib
import pkgutil
import re
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import unavailable
from openforge.core.errors import KINDS, OpenForgeError
from support.paths import REPO

# Extras a module may need; a module that cannot be imported for another reason is a failure.
OPTIONAL = {
    "torch",
    "transformers",
    "safetensors",
    "docker",
    "kubernetes",
    "matplotlib",
    "pyarrow",
    "tensorboard",
    "wandb",
    "mlflow",
    "trackio",
    "verl",
}
STANDARD_BASES = {
    name for name, obj in vars(builtins).items() if isinstance(obj, type) and issubclass(obj, BaseException)
}


def exception_classes(package: str) -> list[type[BaseException]]:
    """Every exception class defined at the top level of a module of `package` (imported to find them)."""
    root = importlib.import_module(package)
    found: list[type[BaseException]] = []
    modules = [root] + [
        importlib.import_module(info.name)
        for info in pkgutil.walk_packages(root.__path__, f"{package}.", onerror=_raise)
        if not info.name.endswith(".__main__")
    ]  # `python -m` entry points run when imported
    for module in modules:
        found += [
            obj
            for obj in vars(module).values()
            if isinstance(obj, type) and issubclass(obj, BaseException) and obj.__module__ == module.__name__
        ]
    return found


def _raise(name: str) -> None:
    raise ImportError(f"cannot import {name}")


def nested_exception_classes(root: Path) -> list[str]:
    """Classes defined inside a function or class whose bases look like exceptions (a standard exception, or a
    name ending in Error / Exception): an import cannot find them, so they are refused outright."""
    found = []
    for path in sorted(root.rglob("*.py")):
        scopes = [
            n
            for n in ast.walk(ast.parse(path.read_text()))
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
        ]
        for scope in scopes:
            for node in ast.walk(scope):
                if (
                    node is not scope
                    and isinstance(node, ast.ClassDef)
                    and any(_looks_like_exception(base) for base in node.bases)
                ):
                    found.append(f"{path.relative_to(root.parent)}:{node.lineno} {node.name}")
    return sorted(set(found))


def _looks_like_exception(base: ast.expr) -> bool:
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return name in STANDARD_BASES or name.endswith(("Error", "Exception"))


def not_in_tree(classes: list[type[BaseException]]) -> list[str]:
    return sorted(f"{c.__module__}.{c.__qualname__}" for c in classes if not issubclass(c, OpenForgeError))


@pytest.fixture(scope="module")
def openforge_exceptions() -> list[type[BaseException]]:
    try:
        return exception_classes("openforge")
    except ModuleNotFoundError as e:
        if (e.name or "").split(".")[0] not in OPTIONAL:
            raise
        unavailable(f"an optional package is not installed: {e.name}")


def test_every_exception_class_joins_the_tree(openforge_exceptions):
    assert len(openforge_exceptions) >= 50
    assert not_in_tree(openforge_exceptions) == []
    assert nested_exception_classes(REPO / "openforge") == []


def test_each_public_class_has_a_kind_and_keeps_its_standard_base(openforge_exceptions):
    from openforge.config import ConfigError
    from openforge.store import EpisodeNotFoundError
    from openforge.tasks import TaskLoadError

    public = [c for c in openforge_exceptions if not c.__name__.startswith("_") and c not in (OpenForgeError, *KINDS)]
    assert [c.__name__ for c in public if not any(k in KINDS for k in c.__mro__)] == []
    # callers that catch the standard exceptions still do
    assert issubclass(ConfigError, ValueError) and issubclass(TaskLoadError, ValueError)
    assert issubclass(EpisodeNotFoundError, LookupError)


def test_the_tree_is_documented(openforge_exceptions):
    design = (REPO / "docs" / "design.md").read_text()
    section = design[design.index("\n## Errors\n") + 1 :]
    section = section[: section.index("\n## ")]
    named = set(re.findall(r"`(\w+)`", section))
    public = {c.__name__ for c in openforge_exceptions if not c.__name__.startswith("_")}
    assert sorted(public - named) == []


def test_a_planted_class_outside_the_tree_is_found(tmp_path, monkeypatch):
    package = tmp_path / "planted"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("")
    (package / "sub" / "errors.py").write_text(
        textwrap.dedent("""
        from openforge.core.errors import ConfigurationError

        class JoinedError(ConfigurationError, ValueError):
            pass

        class StrayError(ValueError):
            pass

        def helper():
            class HiddenError(RuntimeError):
                pass
            return HiddenError
    """)
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        assert not_in_tree(exception_classes("planted")) == ["planted.sub.errors.StrayError"]
    finally:
        for name in [m for m in sys.modules if m == "planted" or m.startswith("planted.")]:
            del sys.modules[name]
    assert nested_exception_classes(package) == ["planted/sub/errors.py:11 HiddenError"]
