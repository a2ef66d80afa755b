"""OpenForge: train LLM agents with reinforcement learning through the real harnesses they run in."""

import os

# torch's OpenMP threads spin while they wait for work. One OpenForge process runs the inference engine, the
# trainer and many harness threads at once; on a small machine spinning threads starve the others (the same
# 128 requests took 5.6 s on one run and 76 s on the next). Passive waiting removes that; set before torch is
# imported, and only if the user has not chosen otherwise.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

__version__ = "0.1.0"
