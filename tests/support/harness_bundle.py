"""The real harnesses' bundle for the tests that run them. No tests here."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from openforge.harness.bundle import bundle_status, default_bundle_dir


def harness_bundle() -> Path:
    """The installed bundle; skips (fails under CI=true) when a harness is missing."""
    bundle = default_bundle_dir()
    status = bundle_status(bundle)
    missing = [h for h in ("claude-code", "codex", "openclaw") if not status.get(h)]
    if missing:
        reason = f"harness bundle at {bundle} lacks {missing}: run `openforge harness install`"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    return bundle
