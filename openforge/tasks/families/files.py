"""The file-operation families: create, append, count, copy, rename, delete, replace, head, grep, sum.

Each is one shell command over a small work directory (the family language: `language.py`); the initial
state varies so that a shortcut is not always right (a "create" whose target exists already, an "append"
whose file or directory does not).
"""

from __future__ import annotations

from openforge.tasks.families.language import (
    KEYS,
    OUT_DIRS,
    WORDS,
    Family,
    FamilyContext,
    FamilyInstance,
    instance,
)

__all__ = [
    "DATA_EXTS",
    "FILE_DIRS",
    "FILE_FAMILIES",
    "TEXT_EXTS",
    "append_line",
    "copy_file",
    "count_lines",
    "create_file",
    "delete_file",
    "grep_lines",
    "head_lines",
    "rename_file",
    "replace_word",
    "sum_numbers",
]

FILE_DIRS = ["notes", "data", "cfg", "docs", "logs", "src", "work", "tmp"]


def create_file(c: FamilyContext) -> FamilyInstance:
    name = c.name()
    path = f"{c.d}/{name}.{c.ext}"
    word, nn = c.rng.choice(WORDS), c.number(10, 99)
    setup: dict[str, str] = {}
    state = c.rng.choice(["no_dir", "dir_exists", "target_exists"])
    if state != "no_dir":
        setup[f"{c.d}/{c.name(avoid=[name])}.{c.ext}"] = f"{c.rng.choice(WORDS)} {c.rng.randrange(10, 100)}\n"
    if state == "target_exists":
        setup[path] = f"{c.rng.choice(WORDS)} {c.rng.randrange(10, 100)}\n"
    c.distractor(setup, FILE_DIRS)
    expected = {**setup, path: f"{word} {nn}\n"}
    sol = f"mkdir -p {c.d} && echo '{word} {nn}' > {path}"
    wrong = f"echo '{word} {nn}' >> {path}" if state != "dir_exists" else f"mkdir -p {c.d} && echo '{word}' > {path}"
    return instance(
        f"Create the file {path} containing '{word} {nn}'.",
        setup,
        expected,
        sol,
        wrong,
        path=path,
        word=word,
        number=nn,
        state=state,
    )


def append_line(c: FamilyContext) -> FamilyInstance:
    name = c.name()
    path = f"{c.d}/{name}.{c.ext}"
    key, n = c.rng.choice(KEYS), c.number(1, 99)
    setup: dict[str, str] = {}
    state = c.rng.choice(["file_exists", "file_exists", "no_file", "no_dir"])
    if state == "file_exists":
        keys = c.rng.sample([k for k in KEYS if k != key], c.rng.randint(1, 3))
        setup[path] = "".join(f"{k}={c.rng.randrange(1, 100)}\n" for k in keys)
    elif state == "no_file":
        setup[f"{c.d}/{c.name(avoid=[name])}.{c.ext}"] = f"{c.rng.choice(KEYS)}={c.rng.randrange(1, 100)}\n"
    c.distractor(setup, FILE_DIRS)
    expected = {**setup, path: setup.get(path, "") + f"{key}={n}\n"}
    sol = f"mkdir -p {c.d} && echo '{key}={n}' >> {path}"
    wrong = (
        f"echo '{key}={n}' > {path}" if state == "file_exists" else f"mkdir -p {c.d} && echo '{key} = {n}' >> {path}"
    )
    return instance(
        f"Append the line '{key}={n}' to {path}.",
        setup,
        expected,
        sol,
        wrong,
        path=path,
        key=key,
        number=n,
        state=state,
    )


def _lines(c: FamilyContext, n: int) -> list[str]:
    if c.ext == "csv":
        return [f"{c.rng.choice(WORDS)},{c.rng.randrange(100)}" for _ in range(n)]
    return [" ".join(c.words(c.rng.randint(1, 3))) for _ in range(n)]


def _out_path(c: FamilyContext, setup: dict[str, str]) -> tuple[str, str]:
    od = c.rng.choice(OUT_DIRS)
    oname = c.name()
    if c.rng.random() < 0.5:
        setup[f"{od}/{c.name(avoid=[oname])}.txt"] = f"{c.rng.randrange(100)}\n"
    return od, f"{od}/{oname}.txt"


def count_lines(c: FamilyContext) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    n = c.rng.randint(2, 30)
    setup = {src: "\n".join(_lines(c, n)) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: f"{n}\n"}
    return instance(
        f"Count the lines of {src} and write the count to {dst}.",
        setup,
        expected,
        f"mkdir -p {od} && wc -l < {src} > {dst}",
        f"mkdir -p {od} && wc -l {src} > {dst}",
        src=src,
        dst=dst,
        count=n,
    )


def copy_file(c: FamilyContext) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    d2 = c.other_dir(FILE_DIRS)
    dst = f"{d2}/{c.name()}.{c.ext}"
    setup = {src: "\n".join(_lines(c, c.rng.randint(1, 4))) + "\n"}
    if c.rng.random() < 0.5:
        setup[f"{d2}/{c.name(avoid=[dst.split('/')[1].split('.')[0]])}.{c.ext}"] = "x\n"
    expected = {**setup, dst: setup[src]}
    return instance(
        f"Copy {src} to {dst}.",
        setup,
        expected,
        f"mkdir -p {d2} && cp {src} {dst}",
        f"mkdir -p {d2} && mv {src} {dst}",
        src=src,
        dst=dst,
    )


def rename_file(c: FamilyContext) -> FamilyInstance:
    a = c.name()
    b = c.name(avoid=[a])
    src, dst = f"{c.d}/{a}.{c.ext}", f"{c.d}/{b}.{c.ext}"
    setup = {src: "\n".join(_lines(c, c.rng.randint(1, 4))) + "\n"}
    c.distractor(setup, FILE_DIRS)
    expected = {k: v for k, v in setup.items() if k != src}
    expected[dst] = setup[src]
    return instance(f"Rename {src} to {dst}.", setup, expected, f"mv {src} {dst}", f"cp {src} {dst}", src=src, dst=dst)


def delete_file(c: FamilyContext) -> FamilyInstance:
    a = c.name()
    path = f"{c.d}/{a}.{c.ext}"
    setup = {path: " ".join(c.words(2)) + "\n", f"{c.d}/{c.name(avoid=[a])}.{c.ext}": " ".join(c.words(2)) + "\n"}
    c.distractor(setup, FILE_DIRS)
    expected = {k: v for k, v in setup.items() if k != path}
    return instance(f"Delete the file {path}.", setup, expected, f"rm {path}", f"rm -r {c.d}", path=path)


def replace_word(c: FamilyContext) -> FamilyInstance:
    path = f"{c.d}/{c.name()}.{c.ext}"
    old, new = c.rng.sample(WORDS, 2)
    others = [w for w in WORDS if w not in (old, new) and old not in w and new not in w]
    lines = [" ".join(c.rng.choice(others) for _ in range(c.rng.randint(1, 3))) for _ in range(c.rng.randint(1, 3))]
    lines.insert(c.rng.randrange(len(lines) + 1), f"{old} {c.rng.choice(others)} {old}")
    if c.rng.random() < 0.5:
        lines.insert(c.rng.randrange(len(lines) + 1), f"{c.rng.choice(others)} {old}")
    setup = {path: "\n".join(lines) + "\n"}
    expected = {path: setup[path].replace(old, new)}
    return instance(
        f"Replace every '{old}' with '{new}' in {path}.",
        setup,
        expected,
        f"sed -i 's/{old}/{new}/g' {path}",
        f"sed -i 's/{old}/{new}/' {path}",
        path=path,
        old=old,
        new=new,
    )


def head_lines(c: FamilyContext) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    k = c.number(2, 15)
    n = c.rng.randint(k + 2, k + 12)
    lines = [f"{i + 1} " + " ".join(c.words(1)) for i in range(n)] if c.ext != "csv" else _lines(c, n)
    setup = {src: "\n".join(lines) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: "\n".join(lines[:k]) + "\n"}
    return instance(
        f"Write the first {k} lines of {src} to {dst}.",
        setup,
        expected,
        f"mkdir -p {od} && head -n {k} {src} > {dst}",
        f"mkdir -p {od} && tail -n {k} {src} > {dst}",
        src=src,
        dst=dst,
        number=k,
    )


def grep_lines(c: FamilyContext) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    word = c.rng.choice(WORDS)
    others = [w for w in WORDS if word not in w]
    n = c.rng.randint(4, 10)
    lines = [" ".join(c.rng.choice(others) for _ in range(c.rng.randint(1, 3))) for _ in range(n)]
    hits = sorted(c.rng.sample(range(n), c.rng.randint(1, n - 2)))
    for i in hits:
        ws = lines[i].split(" ")
        ws.insert(c.rng.randrange(len(ws) + 1), word)
        lines[i] = " ".join(ws)
    setup = {src: "\n".join(lines) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: "\n".join(lines[i] for i in hits) + "\n"}
    return instance(
        f"Write the lines of {src} that contain '{word}' to {dst}.",
        setup,
        expected,
        f"mkdir -p {od} && grep '{word}' {src} > {dst}",
        f"mkdir -p {od} && grep -v '{word}' {src} > {dst}",
        src=src,
        dst=dst,
        word=word,
    )


def sum_numbers(c: FamilyContext) -> FamilyInstance:
    src = f"{c.d}/{c.name()}.{c.ext}"
    nums = [c.rng.randint(1, 99) for _ in range(c.rng.randint(2, 8))]
    nums[0] = max(nums[0], 2)  # the sum always differs from the count
    setup = {src: "\n".join(map(str, nums)) + "\n"}
    od, dst = _out_path(c, setup)
    expected = {**setup, dst: f"{sum(nums)}\n"}
    return instance(
        f"Write the sum of the numbers in {src} (one per line) to {dst}.",
        setup,
        expected,
        f"mkdir -p {od} && awk '{{s += $1}} END {{print s}}' {src} > {dst}",
        f"mkdir -p {od} && wc -l < {src} > {dst}",
        src=src,
        dst=dst,
        total=sum(nums),
    )


TEXT_EXTS = ["txt", "md", "log", "ini", "cfg"]
DATA_EXTS = ["csv", "txt", "log", "dat"]

FILE_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family(
            "create_file",
            "Create the file D/NAME.EXT containing 'WORD NN'.",
            FILE_DIRS,
            TEXT_EXTS,
            create_file,
            "create (or overwrite) a file with a word and a two-digit number",
        ),
        Family(
            "append_line",
            "Append the line 'KEY=N' to D/NAME.EXT.",
            FILE_DIRS,
            ["ini", "cfg", "conf", "env", "txt"],
            append_line,
            "append a key=value line; the file or its directory may not exist yet",
        ),
        Family(
            "count_lines",
            "Count the lines of D/NAME.EXT and write the count to OUT/NAME.txt.",
            ["data", "logs", "notes", "docs", "src", "work"],
            DATA_EXTS,
            count_lines,
            "wc -l into a file",
        ),
        Family(
            "copy_file",
            "Copy D/NAME.EXT to D2/NAME2.EXT.",
            FILE_DIRS,
            TEXT_EXTS,
            copy_file,
            "copy a file into another (maybe missing) directory",
        ),
        Family("rename_file", "Rename D/A.EXT to D/B.EXT.", FILE_DIRS, TEXT_EXTS, rename_file, "rename in place"),
        Family(
            "delete_file",
            "Delete the file D/NAME.EXT.",
            FILE_DIRS,
            TEXT_EXTS,
            delete_file,
            "delete one file, keeping its siblings",
        ),
        Family(
            "replace_word",
            "Replace every 'OLD' with 'NEW' in D/NAME.EXT.",
            FILE_DIRS,
            TEXT_EXTS,
            replace_word,
            "global substitution (some lines hold the word twice)",
        ),
        Family(
            "head_lines",
            "Write the first K lines of D/NAME.EXT to OUT/NAME.txt.",
            ["data", "logs", "notes", "docs", "src", "work"],
            DATA_EXTS,
            head_lines,
            "head -n K into a file",
        ),
        Family(
            "grep_lines",
            "Write the lines of D/NAME.EXT that contain 'WORD' to OUT/NAME.txt.",
            ["data", "logs", "notes", "docs", "src", "work"],
            DATA_EXTS,
            grep_lines,
            "grep into a file",
        ),
        Family(
            "sum_numbers",
            "Write the sum of the numbers in D/NAME.EXT (one per line) to OUT/NAME.txt.",
            ["data", "logs", "notes", "docs", "src", "work"],
            DATA_EXTS,
            sum_numbers,
            "awk sum into a file",
        ),
    ]
}
