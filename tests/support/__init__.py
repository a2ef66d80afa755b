"""Helpers shared by the tests (fakes are named as such in their modules)."""
