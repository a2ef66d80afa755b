"""When a generation ends: an end-of-turn or stop token, a stop string, or the token budget.

Stop tokens and the token that completes a stop string are kept in the output: they were sampled, and a
trainer must see them to learn to stop.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from openforge.core import FinishReason


class StopChecker:
    def __init__(
        self,
        stop_token_ids: Iterable[int],
        stop_strings: Iterable[str],
        max_new_tokens: int,
        decode: Callable[[list[int]], str] | None = None,
    ):
        self.stop_token_ids = frozenset(stop_token_ids)
        self.stop_strings = [s for s in stop_strings if s]
        if self.stop_strings and decode is None:
            raise ValueError("stop strings need a tokenizer to decode the output")
        self.max_new_tokens = max_new_tokens
        self._decode = decode
        # A stop string of n characters spans at most 4n byte-level tokens (a token may hold part of a character).
        self._window = 4 * max((len(s) for s in self.stop_strings), default=0) + 4

    def check(self, output_ids: list[int]) -> FinishReason | None:
        """Call after each appended token; returns why the generation ends now, or None to go on."""
        if output_ids and output_ids[-1] in self.stop_token_ids:
            return FinishReason.stop
        if self.stop_strings and self._completes_stop_string(output_ids):
            return FinishReason.stop
        if len(output_ids) >= self.max_new_tokens:
            return FinishReason.length
        return None

    def _completes_stop_string(self, output_ids: list[int]) -> bool:
        # Only a stop string that ends in the newest token's text counts: earlier ones were checked before.
        window = output_ids[-self._window :]
        assert self._decode is not None  # __init__ refuses stop strings without it
        text = self._decode(window)
        previous = self._decode(window[:-1])
        return any(s in text and s not in previous for s in self.stop_strings)
