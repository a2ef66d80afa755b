"""Sampled ids → text deltas, one token at a time, in constant work per token.

Decoding the whole output again for every new token costs O(n²) over a long reply; decoding the new token on
its own is wrong whenever a character spans tokens (byte-level BPE splits multi-byte characters) or a
tokenizer's decoder looks at its neighbours (SentencePiece's leading space). So each step decodes a short
window — the tokens not yet released, after the last released ones as context (vLLM's scheme) — and
releases what the window adds once it no longer ends in a partial character (U+FFFD). The concatenated deltas equal
`decode(all ids)` (the proxy checks this at the end and takes the whole decode if they ever differ).
"""

from __future__ import annotations

from collections.abc import Callable


class IncrementalDetokenizer:
    def __init__(self, decode: Callable[[list[int]], str], skip: set[int] | frozenset[int] = frozenset()):
        """`decode`: ids → text (control tokens kept). `skip`: ids that are not text (end-of-turn tokens),
        left out of the text wherever they come."""
        self.decode = decode
        self.skip = skip
        self.ids: list[int] = []
        self.text = ""  # released so far
        self._prefix = 0  # where the window starts
        self._read = 0  # ids before this are released

    def add(self, token_id: int) -> str:
        """The text this token completes ("" while it ends inside a character)."""
        if token_id in self.skip:
            return ""
        self.ids.append(token_id)
        prefix_text = self.decode(self.ids[self._prefix : self._read])
        window = self.decode(self.ids[self._prefix :])
        if len(window) <= len(prefix_text) or window.endswith("\ufffd") or not window.startswith(prefix_text):
            return ""
        delta = window[len(prefix_text) :]
        # the released tokens become the next window's context
        self._prefix, self._read = self._read, len(self.ids)
        self.text += delta
        return delta

    def flush(self) -> str:
        """At the end: whatever the remaining ids decode to (a trailing partial character included)."""
        rest = self.decode(self.ids[self._prefix :])[len(self.decode(self.ids[self._prefix : self._read])) :]
        self._read = len(self.ids)
        self.text += rest
        return rest
