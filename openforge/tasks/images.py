"""``--image-map FROM=TO``: base images that cannot be pulled here, mapped onto local ones.

A map applies to an image name (``[environment] docker_image``) or to the ``FROM`` lines of a Dockerfile; it
is the one image mapping of the project (the docker and kubernetes sandboxes apply it too). Keys match after
normalising Docker Hub spellings (``docker.io/library/debian:bookworm-slim`` == ``debian:bookworm-slim``).
A pinned image ``repo:tag@sha256:...`` is matched by, in this order: the same full reference, ``repo@sha256:...``
and ``repo:tag``. A key without a tag or digest matches every tag of that repository; ``*`` matches any image
no other key matches. Exact keys win over tag-less keys, which win over ``*``. ``FROM scratch`` (the empty
image, not a repository) and stage or ``$ARG`` references are never mapped.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from pathlib import Path

import yaml

from openforge.core.errors import ConfigurationError

# The local base image `scripts/build-base-image.sh` builds (nothing is pulled), and the map the quickstart and
# `openforge train` use unless told otherwise: the generated tasks' `FROM debian:bookworm-slim` onto it.
OFFLINE_BASE_IMAGE = "openforge-base:bookworm"
DEFAULT_IMAGE_MAP = {"debian:bookworm-slim": OFFLINE_BASE_IMAGE}


class ImageMapError(ConfigurationError, ValueError):
    pass


# A task tree's own map: `image-map.yaml` in a `--tasks` directory or a directory above it (up to the
# repository's root), applied without being named; `--image-map` entries override it.
TREE_IMAGE_MAP_FILE = "image-map.yaml"


def tree_image_map(roots: Iterable[str | Path]) -> tuple[ImageMap, list[Path]]:
    """The image maps of the task trees `roots` belong to, merged in order, and the files they came from."""
    merged, files = ImageMap(), []
    for root in roots:
        for directory in [Path(root).resolve(), *Path(root).resolve().parents]:
            candidate = directory / TREE_IMAGE_MAP_FILE
            if candidate.is_file():
                if candidate not in files:
                    merged = merged.merged(ImageMap.load(candidate))
                    files.append(candidate)
                break
            if (directory / ".git").exists():
                break
    return merged, files


def normalize_image(name: str) -> str:
    """Canonical spelling for comparison: drop ``docker.io/`` and ``library/``, add ``:latest`` when untagged."""
    n = name.strip()
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if n.startswith(prefix):
            n = n[len(prefix) :]
            break
    if n.startswith("library/"):
        n = n[len("library/") :]
    repo, tag, digest = split_image(n)
    if not tag and not digest:
        tag = "latest"
    return repo + (f":{tag}" if tag else "") + (f"@{digest}" if digest else "")


def split_image(name: str) -> tuple[str, str | None, str | None]:
    """'reg:5000/a/b:tag@sha256:x' -> ('reg:5000/a/b', 'tag', 'sha256:x')."""
    digest = None
    if "@" in name:
        name, digest = name.split("@", 1)
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        repo, tag = name.rsplit(":", 1)
        return repo, tag, digest
    return name, None, digest


def _has_tag(name: str) -> bool:
    n = name.strip()
    _, tag, digest = split_image(n)
    return bool(tag or digest)


class ImageMap:
    """An ordered mapping of image names; ``ImageMap()`` maps nothing."""

    def __init__(self, pairs: Mapping[str, str] | Iterable[tuple[str, str]] | None = None):
        self._exact: dict[str, str] = {}
        self._repo: dict[str, str] = {}
        self._fallback: str | None = None
        self._pairs: list[tuple[str, str]] = []
        items = pairs.items() if isinstance(pairs, Mapping) else (pairs or [])
        for src, dst in items:
            self.add(src, dst)

    def add(self, src: str, dst: str) -> None:
        src, dst = str(src).strip(), str(dst).strip()
        if not src or not dst:
            raise ImageMapError(f"image map entry {src!r} -> {dst!r}: both sides must be non-empty image names")
        if any(c.isspace() for c in src + dst):
            raise ImageMapError(f"image map entry {src}={dst}: image names cannot contain spaces")
        self._pairs.append((src, dst))
        if src == "*":
            self._fallback = dst
        elif _has_tag(src):
            self._exact[normalize_image(src)] = dst
        else:
            self._repo[split_image(normalize_image(src))[0]] = dst

    # ---- construction -------------------------------------------------------------------------------

    @classmethod
    def parse(cls, entries: str | Iterable[str] | None) -> ImageMap:
        """From ``--image-map`` strings: each ``FROM=TO``; one string may hold several, comma-separated."""
        if entries is None:
            return cls()
        if isinstance(entries, str):
            entries = [entries]
        m = cls()
        for entry in entries:
            for part in str(entry).split(","):
                part = part.strip()
                if not part:
                    continue
                if part.count("=") != 1:
                    raise ImageMapError(f"image map entry {part!r} must be FROM=TO (exactly one '=')")
                src, dst = part.split("=", 1)
                m.add(src, dst)
        return m

    @classmethod
    def from_config(cls, data: object) -> ImageMap:
        """From a config value: ``{FROM: TO, ...}`` or a list of ``"FROM=TO"`` strings / ``{from:, to:}`` dicts.

        A mapping with a single ``image_map`` key (a whole image-map YAML file) is unwrapped.
        """
        if data is None:
            return cls()
        if not isinstance(data, Mapping | Iterable):
            raise ImageMapError(f"expected a mapping of FROM: TO or a list of FROM=TO, got {data!r}")
        if isinstance(data, Mapping):
            if set(data) == {"image_map"}:
                return cls.from_config(data["image_map"])
            m = cls()
            for k, v in data.items():
                if not isinstance(v, str):
                    raise ImageMapError(f"image map entry {k!r}: the target must be an image name, got {v!r}")
                m.add(str(k), v)
            return m
        m = cls()
        for item in data:
            if isinstance(item, str):
                m._pairs_extend(cls.parse(item))
            elif isinstance(item, Mapping) and {"from", "to"} <= set(item):
                m.add(str(item["from"]), str(item["to"]))
            else:
                raise ImageMapError(f"image map entry {item!r}: expected 'FROM=TO' or {{from: ..., to: ...}}")
        return m

    @classmethod
    def load(cls, path: str | Path) -> ImageMap:
        """From a YAML file holding a mapping (optionally under an ``image_map`` key)."""
        p = Path(path)
        try:
            data = yaml.safe_load(p.read_text())
        except OSError as e:
            raise ImageMapError(f"{p}: cannot read image map: {e.strerror}") from None
        except yaml.YAMLError as e:
            raise ImageMapError(f"{p}: not valid YAML: {e}") from None
        try:
            return cls.from_config(data)
        except ImageMapError as e:
            raise ImageMapError(f"{p}: {e}") from None

    def _pairs_extend(self, other: ImageMap) -> None:
        for s, d in other.pairs:
            self.add(s, d)

    def merged(self, other: ImageMap) -> ImageMap:
        """A new map with ``other``'s entries added after (and overriding) this one's."""
        m = ImageMap(self._pairs)
        m._pairs_extend(other)
        return m

    # ---- use -----------------------------------------------------------------------------------------

    @property
    def pairs(self) -> list[tuple[str, str]]:
        return list(self._pairs)

    def __bool__(self) -> bool:
        return bool(self._pairs)

    def __len__(self) -> int:
        return len(self._pairs)

    def __repr__(self) -> str:
        return "ImageMap(" + ", ".join(f"{s}={d}" for s, d in self._pairs) + ")"

    def to_dict(self) -> dict[str, str]:
        return dict(self._pairs)

    def lookup(self, image: str) -> str | None:
        """The target for ``image``, or None when no entry matches."""
        norm = normalize_image(image)
        repo, tag, digest = split_image(norm)
        pinned = [norm]
        if digest and tag:  # repo:tag@sha256:... is also the image of repo@sha256:... and of repo:tag
            pinned += [f"{repo}@{digest}", f"{repo}:{tag}"]
        for ref in pinned:
            if ref in self._exact:
                return self._exact[ref]
        if repo in self._repo:
            return self._repo[repo]
        return self._fallback

    def map_image(self, image: str) -> str:
        """``image`` mapped, or unchanged when no entry matches."""
        target = self.lookup(image)
        return target if target is not None else image

    def apply_to_dockerfile(self, text: str) -> str:
        """Rewrite the image of every ``FROM`` line; stage references (``FROM builder``) and ``$ARG`` images stay."""
        return self.rewrite_dockerfile(text)[0]

    def rewrite_dockerfile(self, text: str) -> tuple[str, list[str]]:
        """(``text`` with every ``FROM`` image mapped, the base images it needs after mapping): stage references
        (``FROM builder``), ``$ARG`` images and ``scratch`` stay as written and are not base images."""
        stages: set[str] = set()
        bases: list[str] = []
        out = []
        for line in text.splitlines(keepends=True):
            m = _FROM_RE.match(line)
            if not m:
                out.append(line)
                continue
            image, rest = m.group("image"), m.group("rest") or ""
            alias = re.match(r"\s+AS\s+(\S+)", rest, re.IGNORECASE)
            if image.lower() not in stages and "$" not in image and image.lower() != "scratch":
                image = self.map_image(image)
                if image.lower() != "scratch":
                    bases.append(image)
            if alias:
                stages.add(alias.group(1).lower())
            out.append(f"{m.group('head')}{image}{rest}{m.group('eol') or ''}")
        return "".join(out), bases


_FROM_RE = re.compile(
    r"^(?P<head>\s*FROM\s+(?:--\S+\s+)*)(?P<image>[^\s#]+)(?P<rest>[^\r\n]*?)(?P<eol>\r\n|\r|\n)?$",
    re.IGNORECASE,
)
