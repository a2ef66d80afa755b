"""A cheap similarity of texts that runs on CPU: Jaccard overlap of word shingles.

Used to find near-identical teacher trajectories (their tool calls as text, `openforge.train.teacher_selection`)
and near-duplicate generated tasks (instruction and tests, `openforge.curate.prune`). Texts are lower-cased,
split into words and punctuation, and cut into overlapping runs of `n` tokens; two texts are as similar as the
share of runs they have in common (1.0: the same runs; 0.0: none shared). Numbers stay tokens of their own, so
tasks that differ only in a file name or a value still score high — which is what a duplicate is.
"""

from __future__ import annotations

import re

_TOKEN = re.compile(r"\w+|[^\w\s]")
SHINGLE = 3


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def shingles(text: str, n: int = SHINGLE) -> frozenset[str]:
    """The text's runs of `n` tokens (a shorter text is one run of all its tokens)."""
    words = tokens(text)
    if len(words) <= n:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + n]) for i in range(len(words) - n + 1))


def jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def similarity(a: str, b: str, n: int = SHINGLE) -> float:
    return jaccard(shingles(a, n), shingles(b, n))


class ShingleIndex:
    """Items by key, each one or more texts (its parts), to find the item most similar to a new one: two items
    are as similar as their *least* similar part (exact Jaccard: fine for thousands of items)."""

    def __init__(self, n: int = SHINGLE):
        self.n = n
        self._items: dict[str, tuple[frozenset[str], ...]] = {}

    def add(self, key: str, *parts: str) -> None:
        self._items[key] = tuple(shingles(p, self.n) for p in parts)

    def nearest(self, *parts: str) -> tuple[str | None, float]:
        """(the key of the most similar item, its similarity); (None, 0.0) when the index is empty."""
        probe = tuple(shingles(p, self.n) for p in parts)
        best, score = None, 0.0
        for key, other in self._items.items():
            s = min(jaccard(a, b) for a, b in zip(probe, other, strict=True))
            if s > score:
                best, score = key, s
        return best, score

    def __len__(self) -> int:
        return len(self._items)
