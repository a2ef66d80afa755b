"""The recording proxy: harnesses call it as Anthropic / OpenAI; it renders each call into token ids, serves
it from a `Backend`, records it token for token, and answers in the harness's own wire format."""
