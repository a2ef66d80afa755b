"""`openforge tasks curate`: turn a description of a domain (seed tasks and/or topics) into Harbor task
directories that provably work, with one report.

    propose  a generator writes candidate tasks (the six files) in parallel    generators.py, model_generator.py
    prune    schema errors, duplicates, instructions that leak the tests       prune.py
    build    the environment builds within its timeout (image maps apply)      build.py
    test     do-nothing scores 0, the oracle 1, wrong.sh < 1, the hack suite < 1   checks.py, hacks.py
             an independent solver attempts it k times: the pass rate          difficulty.py
    refine   failures go back to the generator with the evidence (bounded)     refine.py
    select   pass rate within a band; a train / held-out split                 select.py

`pipeline.py` runs the stages (resumable: the ledger, `ledger.py`, is written after every step) and
`report.py` writes the funnel, the rejections with their stage and reason, and the time and tokens per
accepted task. The quality of what comes out depends on the generator model; the scripted generator
(`examples/curate/scripted_generator.py`) exists to test the pipeline, not to make tasks.
"""

from openforge.curate.config import CurateConfig, SolverSettings
from openforge.curate.pipeline import CurateError, run_curation

__all__ = ["CurateConfig", "CurateError", "SolverSettings", "run_curation"]
