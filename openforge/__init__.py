"""OpenForge: train LLM agents with reinforcement learning through the real harnesses they run in."""

__version__ = "0.1.0"
