"""veRL 0.9.1 integration (`pip install 'openforge-rl[verl]'`).

- `agent_loop`: `OpenForgeAgentLoop`, registered as agent loop "openforge" (`agent_loop.yaml`): each rollout is a
  real harness episode, recorded by the OpenForge proxy, graded, assembled, returned as `AgentLoopOutput`s.
- `backend`: `VerlServerBackend`, the proxy's backend that samples through veRL's own server client.
- `dataset`: the parquet veRL reads (one row per task × harness).
- `batch`: assembled samples → a veRL `DataProto` (offline export of a recorded run).

Nothing here is imported by `openforge` itself: veRL is an optional dependency.
"""

AGENT_NAME = "openforge"
