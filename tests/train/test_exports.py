"""`openforge.train` resolves its trainers lazily (they import torch): every exported name resolves, and what
type checkers see (`__all__`, the TYPE_CHECKING imports) is what `__getattr__` serves."""

import ast
import importlib
from pathlib import Path

import pytest

import openforge.train as train


def test_every_exported_name_resolves_from_its_module():
    lazy = train._TRAINER_EXPORTS
    assert set(train.__all__) == {"AssemblyMetrics", "assemble", "assemble_episode", "assemble_run", *lazy}
    for name, module in lazy.items():
        assert getattr(train, name) is getattr(importlib.import_module(f"openforge.train.{module}"), name)
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        train.nothing  # noqa: B018


def test_type_checking_imports_name_each_lazy_export_from_its_module():
    tree = ast.parse(Path(train.__file__).read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    imported = {
        alias.name: node.module for node in guarded.body if isinstance(node, ast.ImportFrom) for alias in node.names
    }
    assert imported == {name: f"openforge.train.{module}" for name, module in train._TRAINER_EXPORTS.items()}
