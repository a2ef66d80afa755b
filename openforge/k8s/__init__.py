"""Kubernetes deployment of a run: manifests as plain dicts (`manifests.py`). The sandbox backend itself is
`openforge.sandbox.kubernetes`."""
