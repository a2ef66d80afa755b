"""Where things are, for every test module wherever it sits under tests/."""

from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
REPO = TESTS.parent
POLICIES = TESTS / "policies"
FIXTURES = TESTS / "fixtures"
EXAMPLES = REPO / "examples" / "tasks"
