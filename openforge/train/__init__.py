"""Training: the assembler (recorded calls → samples) and the trainers."""

from openforge.train.assemble import (
    AssemblyMetrics,
    assemble,
    assemble_episode,
    assemble_run,
)

__all__ = [
    "AssemblyMetrics",
    "assemble",
    "assemble_episode",
    "assemble_run",
]
