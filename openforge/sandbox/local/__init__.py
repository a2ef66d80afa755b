"""Local sandboxes: a process sandbox in a fresh directory, for machines without Docker; and the light jail
(`jail.py`) for in-process episodes, built on the same bubblewrap builder (`bwrap.py`).

Every command runs under **bubblewrap** (`bwrap`, Debian package `bubblewrap`) in fresh mount, pid, ipc and uts
namespaces (and a fresh network namespace unless `spec.proxy_tcp` is used), as an **unprivileged user**
(`openforge-agent`, created with `useradd` on first use when running as root; `spec.user` / `exec(user=)`
choose another, `"root"` for the verifier). The sandbox sees:

- the host's `/usr`, `/etc` and the `/bin`, `/sbin`, `/lib*` links, **read-only**;
- its own root file system everywhere else, kept in `<root>/<name>/fs/` on the host (owned by root, so only
  root in the sandbox creates top-level directories, as in a container) and persisting across commands: the
  working directory (`spec.workdir`, default `/app`, owned by the agent user), `/tmp`, `/home/<agent>`, `/root`,
  `/logs/verifier`, and whatever `copy_in` or a command writes (say `/tests`, `/srv`);
- `spec.mounts` at their targets (read-only unless said otherwise), fresh `/proc` and `/dev`.

So paths are the same as in a container (`/app`, `/tests`, `/logs/verifier/reward.txt`), and the task's
`tests/` and `solution/` — wherever they are on the host — are simply not there until grading copies the tests
in (`copy_in(tests, "/tests")`). The per-sandbox directory is root-only (0700) on the host.

Proxy: with `spec.proxy_uds`, the model API socket is bound into the sandbox and a relay (`forwarder.py`,
started inside as root before the command drops privileges, so the agent cannot kill it) listens on the
sandbox's own loopback `127.0.0.1:<proxy_port>`: `proxy_url` is `http://127.0.0.1:<proxy_port>`, and nothing
else on the network is reachable (a fresh network namespace has only `lo`). With `spec.proxy_tcp` instead
(`"127.0.0.1:8100"`), the sandbox shares the host's network and `proxy_url` is `http://<proxy_tcp>`.

Limits: when running as root with a writable cgroup hierarchy (v1 or v2), each sandbox gets its own cgroup —
memory (no swap on top), pids and CPU quota enforced by the kernel, and the OOM-kill counter feeds
`status().oom_killed`. Otherwise rlimits are the fallback: RLIMIT_NPROC (counted per user across all
sandboxes of that user) and, only with `rlimit_memory=True`, RLIMIT_AS (virtual memory, which breaks runtimes
that reserve large address spaces such as Node); CPU share is then not limited.

What the local sandbox does not isolate
---------------------------------------
- **The host's read-only system files**: everything under `/usr` and `/etc` is readable (world-readable files
  only, for the agent user) — installed software, configuration, `/etc/passwd`. Secrets must not live there.
- **Network with `proxy_tcp`**: the sandbox then shares the host's network namespace: every service on the
  host's loopback (the proxy's admin listener included, if it listens on TCP) and the outside network are
  reachable. Use `proxy_uds` (the default in the orchestrator) for loopback-only isolation.
- **The kernel**: one shared kernel, no seccomp filter beyond bubblewrap's defaults; a kernel exploit escapes.
- **Disk**: no quota; a sandbox can fill the disk holding `<root>`.
- **Without root**: no user switch (commands run as the calling user, so files that user can read on the
  bound system paths are readable), no cgroups (rlimits only), and bubblewrap needs unprivileged user
  namespaces.
- **Processes that escape the per-command pid namespace**: none can by construction, but each `exec` gets its
  own pid namespace, so a background process started by one exec does not survive it (unlike Docker).
- **Time**: `/proc` shows the host's uptime and load; the hostname is per sandbox.

Modules: `provider.py` (`LocalProvider`: sandbox directories, users, cleanup), `sandbox.py` (`LocalSandbox`:
exec through bubblewrap, files, status), `bwrap.py` (the one bubblewrap command builder), `cgroups.py`,
`users.py`, `jail.py` (`run_jailed`: one shell command as `nobody`, no network, for the quickstart's episodes).
"""

from .bwrap import bwrap_available
from .cgroups import Cgroup
from .jail import JailError, jail_available, prepare_workdir, run_jailed
from .provider import LocalProvider
from .sandbox import BASE_PATH, LocalSandbox, remove_sandbox_dir

__all__ = [
    "BASE_PATH",
    "Cgroup",
    "JailError",
    "LocalProvider",
    "LocalSandbox",
    "bwrap_available",
    "jail_available",
    "prepare_workdir",
    "remove_sandbox_dir",
    "run_jailed",
]
