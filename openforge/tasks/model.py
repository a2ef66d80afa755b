"""Typed models of a Harbor / Terminal-Bench 2.0 task directory.

The field names and defaults follow Harbor's ``task.toml`` so that existing tasks load unchanged:

    version = "1.0"                 # or schema_version = "1.1"
    [task]        name, description, keywords, authors      (newer Harbor packages)
    [metadata]    author_name, author_email, difficulty, category, tags, ... (free-form)
    [verifier]    timeout_sec = 600.0, env = {}, allowed_changes = [], state_paths = []   (the last two ours)
    [agent]       timeout_sec, user = "root" | "agent"                 (user is ours)
    [environment] build_timeout_sec = 600.0, docker_image, cpus, memory_mb (or memory = "2G"),
                  storage_mb (or storage = "10G"), gpus, allow_internet, workdir, env, mcp_servers
    [environment.gui] kind = "web" | "desktop", start_url, socket, service    (ours: GUI tasks)
    [solution]    env = {}

Fields we do not use are kept (``extra="allow"``), never fatal. Our own extensions are all optional:
``[metadata] id``, ``split`` ("train" / "heldout"), ``family``, ``kind``; ``[environment] pids_limit``;
``[verifier] allowed_changes`` (globs of system paths the agent may change without it counting as tampering,
``openforge.rollout.tamper``), ``[verifier] state_paths`` (paths outside the work area the verifier reads, copied
with it into the sandbox grading runs in); ``[agent] user`` (``"agent"``: run the agent unprivileged where the sandbox
can); ``[environment.gui]`` (a GUI task: `GuiConfig`); ``solution/wrong.sh`` (a plausible but wrong solution that
must score below 1).
"""

from __future__ import annotations

import re
from pathlib import Path, PurePosixPath
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openforge.tasks.reward import REWARD_DIR

Split = Literal["train", "heldout"]

# Defaults used where a task leaves a resource unset (Harbor leaves them to the environment).
DEFAULT_CPUS = 1.0
DEFAULT_MEMORY_MB = 2048
DEFAULT_PIDS = 512
DEFAULT_AGENT_TIMEOUT_S = 600.0
DEFAULT_VERIFIER_TIMEOUT_S = 600.0
DEFAULT_BUILD_TIMEOUT_S = 600.0


class _Open(BaseModel):
    """Keeps unknown fields (a newer Harbor may add some) instead of rejecting them."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


def parse_size_mb(value: str) -> int:
    """'2G' -> 2048, '512M' -> 512, '1024K' -> 1, '1.5g' -> 1536 (Harbor's memory / storage strings)."""
    s = str(value).strip().upper()
    for suffix in ("IB", "B"):  # tolerate "2GiB" / "512MB"
        if s.endswith(suffix) and len(s) > len(suffix) and s[-len(suffix) - 1] in "GMKT":
            s = s[: -len(suffix)]
            break
    units = {"T": 1024 * 1024, "G": 1024, "M": 1, "K": 1 / 1024}
    if s and s[-1] in units:
        try:
            return int(float(s[:-1]) * units[s[-1]])
        except ValueError:
            pass
    raise ValueError(f"invalid size {value!r}: expected a number with a unit, like '2G' or '512M'")


class PackageAuthor(_Open):
    name: str
    email: str | None = None


class PackageInfo(_Open):
    """The ``[task]`` table of newer Harbor packages (``name = "org/name"``)."""

    name: str | None = None
    version: str | None = None
    description: str = ""
    authors: list[PackageAuthor] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class TaskMetadata(_Open):
    author_name: str | None = None
    author_email: str | None = None
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = Field(default_factory=list)
    # OpenForge extensions (optional)
    id: str | None = None
    split: Split | None = None
    family: str | None = None
    kind: str | None = None
    # the tool kinds a solution needs (behaviour analytics: tool coverage); see openforge.harness.tools.ToolKind
    required_tools: (
        list[Literal["shell", "read", "write", "edit", "search", "observe", "interact", "navigate"]] | None
    ) = None

    @field_validator("split", mode="before")
    @classmethod
    def _norm_split(cls, v: Any) -> Any:
        return normalize_split(v) if isinstance(v, str) else v


class VerifierConfig(_Open):
    timeout_sec: float = DEFAULT_VERIFIER_TIMEOUT_S
    env: dict[str, str] = Field(default_factory=dict)
    # OpenForge extension: absolute shell globs (`*` also matches `/`) of paths the agent may change without
    # it counting as tampering with the verifier (`openforge.rollout.tamper`)
    allowed_changes: list[str] = Field(default_factory=list)

    @field_validator("allowed_changes")
    @classmethod
    def _absolute_globs(cls, v: list[str]) -> list[str]:
        for g in v:
            if not isinstance(g, str) or not g.startswith("/"):
                raise ValueError(
                    f"{g!r} is not an absolute path glob: write it as the path appears in the "
                    'sandbox, e.g. "/usr/local/lib/python3*/dist-packages/*"'
                )
        return v

    # OpenForge extension: absolute paths outside the work area that the verifier reads (packages the agent
    # installs, files under /etc, an app's data): grading copies them, with the work area, from the agent's
    # sandbox into the fresh one it grades in (`openforge.rollout.grader`)
    state_paths: list[str] = Field(default_factory=list)

    @field_validator("state_paths")
    @classmethod
    def _state_paths(cls, v: list[str]) -> list[str]:
        for p in v:
            pp = PurePosixPath(p)
            if not pp.is_absolute() or ".." in pp.parts or any(c in p for c in "*?["):
                raise ValueError(
                    f"{p!r} is not an absolute path: write each path the verifier reads as it appears in the "
                    'sandbox, without globs or "..", e.g. "/etc/myapp/config.toml" or "/var/lib/myapp"'
                )
            clash = next((r for r in RESERVED_PATHS if overlaps(str(pp), r)), None)
            if clash is not None:
                raise ValueError(
                    f"{p!r} overlaps {clash}, which is the whole file system, the kernel's or made afresh by "
                    "grading: name the files or directories of the task's own state instead"
                )
        return v


#: Where grading puts the task's tests and the verifier's HOME in the sandbox it grades in
#: (`openforge.rollout.grading`).
TESTS_DIR = "/tests"
VERIFIER_HOME = "/tmp/openforge-verifier-home"
#: What no state of a task may overlap: the whole file system, what grading makes afresh, the kernel's.
RESERVED_PATHS = ("/", TESTS_DIR, REWARD_DIR, VERIFIER_HOME, "/proc", "/sys", "/dev")


def overlaps(path: str, other: str) -> bool:
    """Whether absolute `path` is `other`, lies below it, or holds it (`/` overlaps only itself)."""
    if other == "/" or path == "/":
        return path == other
    return path == other or path.startswith(other + "/") or other.startswith(path + "/")


AgentUser = Literal["root", "agent"]


class AgentConfig(_Open):
    timeout_sec: float | None = None
    # OpenForge extension: who the agent runs as where the sandbox can choose (docker, kubernetes): "root" (the
    # image's user, root in Harbor images) or "agent" (an unprivileged user owning its home and work dir)
    user: AgentUser | None = None


#: where a desktop task's desktop server listens unless `[environment.gui] socket` says otherwise
DESKTOP_SOCKET = "/run/desktop/gui.sock"


class GuiConfig(_Open):
    """``[environment.gui]``: the task is done through a GUI (docs/design.md, "GUI tasks").

    - `kind`: ``"web"`` (a browser on the task's own site) or ``"desktop"`` (an app on a desktop: Xvfb, a window
      manager, the app, all behind the task's desktop server, `openforge.tasks.families.desktop_server`);
    - `start_url` (web tasks, required there): what the harness opens first; its origin is the only one the
      harness may visit;
    - `socket` (desktop tasks): the desktop server's unix socket in the sandbox, the harness's only way to the
      desktop (GUI operations: observe, click, type, select, key, scroll); default ``/run/desktop/gui.sock``;
    - `service`: a command run as root in the agent's sandbox after its environment is set up and before the
      harness starts (`openforge.rollout.service`): it starts the task's app as another user, its data where the
      agent cannot reach it (`[verifier] state_paths` names it for grading), and returns once the app answers
      (`start_url` for a web task, the socket for a desktop one); a failing service is the task's setup error,
      never the agent's;
    - `service_timeout_sec`: how long the service may take.

    A GUI task's agent always runs as the unprivileged user `agent` (`openforge.rollout.task_environment`): the
    app's isolation from the agent depends on it."""

    kind: Literal["web", "desktop"] = "web"
    start_url: str | None = None
    socket: str | None = None
    service: str | None = None
    service_timeout_sec: float = 120.0

    @field_validator("start_url")
    @classmethod
    def _start_url(cls, v: str | None) -> str | None:
        if v is not None and not re.fullmatch(r"https?://[A-Za-z0-9.\-\[\]:]+(/[^\s]*)?", v):
            raise ValueError(
                f"start_url = {v!r} is not an http(s) URL with a host: write the page the harness opens first, "
                'e.g. "http://127.0.0.1:8080/"'
            )
        return v

    @model_validator(mode="after")
    def _by_kind(self) -> GuiConfig:
        if self.kind == "web":
            if self.start_url is None:
                raise ValueError('a web task (kind = "web") needs start_url, e.g. start_url = "http://127.0.0.1:8080/"')
            if self.socket is not None:
                raise ValueError('socket is a desktop task\'s (kind = "desktop"); a web task has start_url only')
        else:
            if self.start_url is not None:
                raise ValueError(
                    'start_url is a web task\'s; a desktop task (kind = "desktop") is reached through its desktop '
                    f'server\'s socket (socket = "{DESKTOP_SOCKET}", the default): remove start_url'
                )
            if self.socket is None:
                self.socket = DESKTOP_SOCKET
            elif not self.socket.startswith("/") or any(c.isspace() for c in self.socket):
                raise ValueError(f"socket = {self.socket!r}: write the absolute path of the desktop server's socket")
        return self

    @property
    def origin(self) -> str:
        """``scheme://host[:port]`` of `start_url`: the only origin the harness may visit ("" for a desktop task)."""
        if self.start_url is None:
            return ""
        scheme, _, rest = self.start_url.partition("://")
        return f"{scheme}://{rest.split('/', 1)[0]}"


class EnvironmentConfig(_Open):
    build_timeout_sec: float = DEFAULT_BUILD_TIMEOUT_S
    docker_image: str | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    storage_mb: int | None = None
    gpus: int | None = None
    allow_internet: bool | None = None
    workdir: str | None = None
    env: dict[str, str] = Field(default_factory=dict)
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list)
    # OpenForge extension: process limit for the sandbox
    pids_limit: int | None = None
    # OpenForge extension: a GUI task (`GuiConfig`)
    gui: GuiConfig | None = None

    @model_validator(mode="before")
    @classmethod
    def _legacy_sizes(cls, data: Any) -> Any:
        """Harbor's older ``memory = "2G"`` / ``storage = "10G"`` strings become ``memory_mb`` / ``storage_mb``."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            if old not in data:
                continue
            raw = data.pop(old)
            if isinstance(raw, bool) or not isinstance(raw, (str, int, float)):
                raise ValueError(f"{old} = {raw!r}: must be a size string like '2G' or '512M'")
            mb = int(raw) if isinstance(raw, (int, float)) else parse_size_mb(raw)
            if data.get(new) is not None and data[new] != mb:
                raise ValueError(f"{old} = {raw!r} ({mb} MB) conflicts with {new} = {data[new]!r}")
            data.setdefault(new, mb)
        return data


class SolutionConfig(_Open):
    env: dict[str, str] = Field(default_factory=dict)


class TaskConfig(_Open):
    """``task.toml``; ``version`` and ``schema_version`` are the same field (Harbor renamed it)."""

    version: str = "1.0"
    task: PackageInfo | None = None
    metadata: TaskMetadata = Field(default_factory=TaskMetadata)
    verifier: VerifierConfig = Field(default_factory=VerifierConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    environment: EnvironmentConfig = Field(default_factory=EnvironmentConfig)
    solution: SolutionConfig = Field(default_factory=SolutionConfig)

    @model_validator(mode="before")
    @classmethod
    def _schema_version(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schema_version" in data:
            data = dict(data)
            sv = data.pop("schema_version")
            data.setdefault("version", sv)
        if isinstance(data, dict) and isinstance(data.get("version"), (int, float)):
            data = dict(data)
            data["version"] = str(data["version"])
        return data


class Resources(BaseModel):
    """What the sandbox should grant, with defaults filled in."""

    cpus: float = DEFAULT_CPUS
    memory_mb: int = DEFAULT_MEMORY_MB
    storage_mb: int | None = None
    pids: int = DEFAULT_PIDS
    gpus: int = 0
    agent_timeout_s: float = DEFAULT_AGENT_TIMEOUT_S
    verifier_timeout_s: float = DEFAULT_VERIFIER_TIMEOUT_S
    build_timeout_s: float = DEFAULT_BUILD_TIMEOUT_S


class Task(BaseModel):
    """One loaded task directory. Paths are absolute."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    id: str
    path: Path
    instruction: str
    config: TaskConfig
    environment_dir: Path | None = None
    dockerfile: Path | None = None
    image: str | None = None
    tests_dir: Path
    solution_dir: Path | None = None
    solve_script: Path | None = None
    wrong_script: Path | None = None
    look_script: Path | None = None  # solution/look.sh: a read-only look the oracle runs before solve.sh
    check_script: Path | None = None  # solution/check.sh: a read-only check the oracle runs after solve.sh
    split: Split | None = None

    @property
    def resources(self) -> Resources:
        env = self.config.environment
        return Resources(
            cpus=env.cpus if env.cpus is not None else DEFAULT_CPUS,
            memory_mb=env.memory_mb if env.memory_mb is not None else DEFAULT_MEMORY_MB,
            storage_mb=env.storage_mb,
            pids=env.pids_limit if env.pids_limit is not None else DEFAULT_PIDS,
            gpus=env.gpus or 0,
            agent_timeout_s=(
                self.config.agent.timeout_sec if self.config.agent.timeout_sec is not None else DEFAULT_AGENT_TIMEOUT_S
            ),
            verifier_timeout_s=self.config.verifier.timeout_sec,
            build_timeout_s=env.build_timeout_sec,
        )

    @property
    def test_script(self) -> Path:
        return self.tests_dir / "test.sh"

    @property
    def workdir(self) -> str | None:
        """``[environment] workdir``, else the Dockerfile's last WORKDIR, else None (the image's own)."""
        if self.config.environment.workdir:
            return self.config.environment.workdir
        if self.dockerfile is not None and self.dockerfile.is_file():
            return dockerfile_workdir(self.dockerfile.read_text(errors="replace"))
        return None

    @property
    def family(self) -> str | None:
        return self.config.metadata.family

    @property
    def gui(self) -> GuiConfig | None:
        """``[environment.gui]``: None for a task without a GUI."""
        return self.config.environment.gui


_WORKDIR_RE = re.compile(r"^\s*WORKDIR\s+(\S+)\s*$", re.IGNORECASE)


def dockerfile_workdir(text: str) -> str | None:
    """The last absolute WORKDIR of a Dockerfile (relative ones are joined onto the previous)."""
    current: str | None = None
    for line in text.splitlines():
        m = _WORKDIR_RE.match(line)
        if m:
            w = m.group(1).strip("\"'")
            current = w if w.startswith("/") or current is None else current.rstrip("/") + "/" + w
    return current


_SPLIT_ALIASES = {
    "train": "train",
    "training": "train",
    "heldout": "heldout",
    "held-out": "heldout",
    "held_out": "heldout",
}


def normalize_split(value: str) -> str:
    """'train' / 'heldout' (also 'held-out', 'held_out', 'training'); anything else is returned unchanged."""
    return _SPLIT_ALIASES.get(value.strip().lower(), value)
