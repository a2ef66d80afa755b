"""Evaluation: pass@k / pass^k, behaviour metrics, reports."""
