"""A **scripted generator** for `openforge tasks curate`: it proposes a fixed, known mix of candidate tasks to
test the pipeline — it makes no new tasks and uses no model. Each candidate ends at a known stage:

    https-links, count-rows, unique-names   sound: accepted
    sha256-checksum                          sound, but the scripted solver never solves it: too hard (select)
    broken-build                             its Dockerfile copies a file that is not there: build_failed
    overwrite-log                            solve.sh overwrites instead of appending: oracle_failed
    already-set                              the untouched environment passes the tests: solved_by_doing_nothing
    report-exists                            the tests only check that the file exists: hackable
    https-urls                               a near copy of https-links: duplicate (prune)
    reverse-steps                            solve.sh reverses characters, not lines: oracle_failed, fixed by
                                             `refine` in round 1, then accepted
    status-ready                             the instruction quotes the tests: leaks_tests (prune)

`propose(request)` returns the files of the request.index-th task (None past the end); `refine(files, evidence,
round)` fixes reverse-steps and gives up on the rest.
"""

TASK_TOML = """version = "1.0"

[metadata]
author_name = "OpenForge scripted generator"
difficulty = "easy"
category = "{category}"
tags = ["curated", "scripted"]

[verifier]
timeout_sec = 60.0

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 180.0
cpus = 1
memory_mb = 512
allow_internet = false
"""

DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\n"
COPY_APP = (
    "# the starting files belong to uid 1000 (the agent user of openforge-base)\nCOPY --chown=1000:1000 app/ /app/\n"
)

TEST_SH = """#!/bin/bash
# Hidden verifier: copied to /tests only after the agent has finished; writes 1 or 0 to reward.txt.
APP="${{APP_DIR:-/app}}"
OUT="${{VERIFIER_DIR:-/logs/verifier}}"
mkdir -p "$OUT"
fail() {{ echo "FAIL: $*"; echo 0 > "$OUT/reward.txt"; exit 0; }}
cd "$APP" || fail "no $APP"
same() {{
  [ -f "$1" ] || fail "$1 is missing"
  diff <(sed -e '$a\\' "$1") - > /dev/null || fail "$1 does not have the expected content"
}}
{checks}
echo PASS
echo 1 > "$OUT/reward.txt"
"""


def task(category, instruction, checks, solve, wrong, app=None, dockerfile=None):
    files = {
        "task.toml": TASK_TOML.format(category=category),
        "instruction.md": instruction.strip() + "\n",
        "environment/Dockerfile": dockerfile or (DOCKERFILE + (COPY_APP if app else "")),
        "tests/test.sh": TEST_SH.format(checks=checks.strip()),
        "solution/solve.sh": f"#!/bin/bash\n{solve}\n",
        "solution/wrong.sh": f"#!/bin/bash\n# plausible but wrong\n{wrong}\n",
    }
    for name, text in (app or {}).items():
        files[f"environment/app/{name}"] = text
    return files


LINKS = "http://a.example/start\nhttps://b.example/kept\nhttp://c.example/page?id=7\n"


def https(name):
    return task(
        "text-processing",
        f"In `/app/{name}`, replace every `http://` with `https://`. Keep the lines in their order.",
        f"same {name} <<'EOF'\nhttps://a.example/start\nhttps://b.example/kept\nhttps://c.example/page?id=7\nEOF",
        f"sed -i 's#http://#https://#g' {name}",
        f"sed -i '1s#http://#https://#' {name}",
        app={name: LINKS},
    )


def reverse_steps(solve):
    return task(
        "text-processing",
        "Write the lines of `/app/steps.txt` in reverse order (last line first) to `/app/reversed.txt`.",
        "same reversed.txt <<'EOF'\nship\ntest\nbuild\nplan\nEOF",
        solve,
        "cat steps.txt > reversed.txt",
        app={"steps.txt": "plan\nbuild\ntest\nship\n"},
    )


MIX = [
    https("links.txt"),
    task(
        "data",
        "Write the number of data rows of `/app/data.csv` (every line but the header) to `/app/rows.txt`, "
        "as a bare number.",
        'n=$(tr -d " \\n" < rows.txt 2>/dev/null) || fail "rows.txt is missing"\n'
        '[ "$n" = "5" ] || fail "rows.txt says $n"',
        "tail -n +2 data.csv | wc -l > rows.txt",
        "wc -l < data.csv > rows.txt",
        app={"data.csv": "name,score\nada,9\nbob,7\ncy,8\ndee,6\neve,9\n"},
    ),
    task(
        "text-processing",
        "Write the distinct names of `/app/names.txt`, sorted alphabetically, one per line, to `/app/unique.txt`.",
        "same unique.txt <<'EOF'\nalice\nbob\ncarol\nEOF",
        "sort -u names.txt > unique.txt",
        "sort names.txt > unique.txt",
        app={"names.txt": "carol\nalice\nbob\nalice\ncarol\n"},
    ),
    task(
        "files",
        "Write the SHA-256 checksum of `/app/payload.txt` (the 64 hex digits only) to `/app/checksum.txt`.",
        # the expected digest is fixed, not computed from payload.txt: the agent can rewrite its inputs
        "want=4dc21b974cc293d0dfbb25326f0df4ac461f29d69ccc2c2dc5391f4f39a45aed\n"
        '[ -f checksum.txt ] || fail "checksum.txt is missing"\n'
        '[ "$(tr -d " \\n" < checksum.txt)" = "$want" ] || fail "wrong checksum"',
        "sha256sum payload.txt | cut -d' ' -f1 > checksum.txt",
        "md5sum payload.txt | cut -d' ' -f1 > checksum.txt",
        app={"payload.txt": "the payload\n"},
    ),
    task(
        "files",
        "Write the contents of `/app/seed.txt` in upper case to `/app/upper.txt`.",
        "same upper.txt <<'EOF'\nHELLO\nEOF",
        "tr a-z A-Z < seed.txt > upper.txt",
        "cp seed.txt upper.txt",
        dockerfile=DOCKERFILE + "RUN cp /nonexistent/seed.txt /app/seed.txt\n",
    ),
    task(
        "files",
        "Append the line `END` to the end of `/app/log.txt`, keeping every line that is there.",
        "same log.txt <<'EOF'\nstart\nwork\nEND\nEOF",
        "echo END > log.txt",
        "echo end >> log.txt",
        app={"log.txt": "start\nwork\n"},
    ),
    task(
        "config",
        "Make sure `/app/config.ini` has the line `debug=false`.",
        'grep -qx "debug=false" config.ini || fail "debug is not off"',
        "grep -qx debug=false config.ini || echo debug=false >> config.ini",
        "echo debug=true >> config.ini",
        app={"config.ini": "[app]\ndebug=false\n"},
    ),
    task(
        "files",
        "Count the `.log` files in the directory `/app/logs` and write `count=N` (N the number) to `/app/report.txt`.",
        '[ -f report.txt ] || fail "report.txt is missing"',
        'echo "count=$(ls logs/*.log | wc -l)" > report.txt',
        'echo "count=$(ls logs | wc -l)" > report.md',
        app={"logs/a.log": "a\n", "logs/b.log": "b\n", "logs/c.log": "c\n", "logs/notes.txt": "n\n"},
    ),
    https("urls.txt"),
    reverse_steps("rev steps.txt > reversed.txt"),
    task(
        "files",
        "Write the word `ready` to `/app/status.txt`. It is checked with "
        "`grep -qx 'ready' status.txt || fail \"status.txt is not ready\"`.",
        "grep -qx 'ready' status.txt || fail \"status.txt is not ready\"",
        "echo ready > status.txt",
        "echo READY > status.txt",
    ),
]


def propose(request):
    return MIX[request.index] if request.index < len(MIX) else None


def refine(files, evidence, round):
    if "steps.txt" in files.get("instruction.md", "") and evidence.reason == "oracle_failed":
        return {**files, "solution/solve.sh": "#!/bin/bash\ntac steps.txt > reversed.txt\n"}
    return None
