"""Text the tiny model's tokenizer is trained on, generated locally (nothing is downloaded).

The mix follows what an agent's prompts hold: English instructions, shell commands, file paths, JSON tool
calls and results, a little Python. The generator is seeded, so the same seed gives the same corpus and so
the same tokenizer.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator

_WORDS = (
    "the a an of to in on for with and or not is are be was file files line lines text write read create "
    "append count number words word replace delete copy move rename directory folder list sort unique "
    "sum total first last each every print output input result value values key keys name names path "
    "content contents containing contains new old task test tests check run command shell bash script "
    "python function return error fix bug code data csv json config settings report log logs number "
    "please make sure that this the into from then after before when if else use using only exactly "
    "upper lower case column row rows header empty string integer list dictionary tool call calls answer "
    "done submit finished success failed working directory current user assistant system you your"
).split()

_COMMANDS = (
    "echo",
    "cat",
    "printf",
    "wc -l",
    "sort",
    "uniq",
    "head -n",
    "tail -n",
    "grep",
    "sed -i",
    "mkdir -p",
    "cp",
    "mv",
    "rm",
    "ls -la",
    "cut -d, -f",
    "tr",
    "awk",
    "python3 -c",
    "touch",
    "find . -name",
)
_DIRS = ("notes", "data", "out", "cfg", "src", "logs", "tmp", "docs", "app", "work")
_EXTS = ("txt", "csv", "json", "ini", "md", "py", "log", "cfg", "yaml", "sh")
_COLORS = ("red", "blue", "green", "black", "white", "amber", "cyan", "gold")


def _word(rng: random.Random) -> str:
    return rng.choice(_WORDS)


def _path(rng: random.Random) -> str:
    return f"{rng.choice(_DIRS)}/{rng.choice('abcdefghxyz')}{rng.randint(0, 99)}.{rng.choice(_EXTS)}"


def _sentence(rng: random.Random) -> str:
    words = [_word(rng) for _ in range(rng.randint(4, 14))]
    words[0] = words[0].capitalize()
    return " ".join(words) + rng.choice(".!?:")


def _command(rng: random.Random) -> str:
    cmd = rng.choice(_COMMANDS)
    kind = rng.random()
    if kind < 0.3:
        return f"echo '{rng.choice(_COLORS)} {rng.randint(0, 999)}' > {_path(rng)}"
    if kind < 0.5:
        return f"printf 'k={rng.randint(0, 9)}\\n' >> {_path(rng)}"
    if kind < 0.7:
        return f"wc -l < {_path(rng)} > {_path(rng)}"
    return f"{cmd} {_path(rng)}"


def _tool_call(rng: random.Random) -> str:
    name = rng.choice(("bash", "read", "write", "submit", "exec", "Bash", "Read", "Write", "Edit"))
    args = {"command": _command(rng)} if name in ("bash", "exec", "Bash") else {"path": _path(rng)}
    return json.dumps({"name": name, "arguments": args})


def _python(rng: random.Random) -> str:
    fn = f"{_word(rng)}_{_word(rng)}"
    return (
        f"def {fn}(x, y={rng.randint(0, 9)}):\n    if x is None:\n        return []\n"
        f"    return [v for v in x if v > y]\n\nprint({fn}([{rng.randint(0, 9)}, {rng.randint(0, 99)}]))\n"
    )


def _json_schema(rng: random.Random) -> str:
    return json.dumps(
        {
            "name": rng.choice(("bash", "read", "write", "edit", "submit")),
            "description": _sentence(rng),
            "parameters": {
                "type": "object",
                "properties": {"command": {"type": "string", "description": _sentence(rng)}},
                "required": ["command"],
            },
        }
    )


_GENERATORS = (_sentence, _command, _tool_call, _python, _json_schema, _path)


def generate_corpus(seed: int = 0, documents: int = 6000) -> Iterator[str]:
    """Yield `documents` short texts covering prose, commands, paths, JSON and code, deterministically."""
    rng = random.Random(seed)
    # Every printable ASCII character and common punctuation at least once, so merges cover them.
    yield "".join(chr(c) for c in range(32, 127))
    for _ in range(documents):
        parts = [rng.choice(_GENERATORS)(rng) for _ in range(rng.randint(1, 4))]
        yield rng.choice(("\n", " ", "\n\n")).join(parts)
