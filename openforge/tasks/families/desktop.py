"""The desktop task family: OSWorld-style GUI tasks on "Contacts", a GTK 3 app (`desktop_app.py`) on a desktop
(Xvfb, a window manager) inside the task's sandbox, done through the desktop server's GUI operations
(`desktop_server.py`) and graded on the app's database (docs/design.md, "GUI tasks").

Each instance is a Harbor task directory (`write_desktop_task`):

    instruction.md        the goal, every value the agent needs named in it
    task.toml             [environment.gui] kind = "desktop" (the service that starts the desktop), [verifier]
                          state_paths = ["/var/lib/deskapp"], [agent] user = "agent"
    environment/          Dockerfile FROM openforge-desktop:bookworm; desktop/server.py, desktop/app.py (this
                          package's desktop_server.py and desktop_app.py) and the seed, made into the database
    tests/                test.sh → check.py (the web family's web_check.py: SQL checks on the app's database)
    solution/actions.json the GUI demonstration ({"tool", "target": {role, name}, ...}) the oracle sends
    solution/solve.sh     the same steps sent to the desktop server over its socket (the agent's user may reach
                          nothing else): the verifier's check that the end state is reachable; wrong.sh a plausible
                          wrong one

The kinds (`DESKTOP_KINDS`), 3-6 GUI steps each:

    desktop_email    choose a contact, type the new email, save
    desktop_city     choose a contact, type the new city, save
    desktop_group    choose a contact, choose the group, tick Favorite, save
    desktop_new      New contact, type name, email and city, choose the group, save

Splits as for the web family: each kind's subjects (the email's domain, the city, the group) are divided once by
a fixed hash into train and held-out ones (`web.heldout_subjects`).
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforge.tasks.families.language import FamilyError
from openforge.tasks.families.web import (
    CHECK_SOURCE,
    CITIES,
    CUSTOMERS,
    generate_gui_tasks,
    gui_task_toml,
    heldout_subjects,
)

__all__ = [
    "APP_SOURCE",
    "DATA_DIR",
    "DESKTOP_IMAGE",
    "DESKTOP_KINDS",
    "SERVER_SOURCE",
    "DesktopTask",
    "draw_desktop_task",
    "generate_desktop_tasks",
    "write_desktop_task",
]

DESKTOP_IMAGE = "openforge-desktop:bookworm"
DATA_DIR = "/var/lib/deskapp"
APP_SOURCE = Path(__file__).with_name("desktop_app.py")
SERVER_SOURCE = Path(__file__).with_name("desktop_server.py")
SERVICE = "python3 -I /opt/desktop/server.py start"
SOCKET = "/run/desktop/gui.sock"
GROUPS = ["Family", "Friends", "Work", "Other"]
DOMAINS = ["example.com", "example.org", "mail.test", "post.test", "inbox.test", "corp.test", "lab.test", "home.test"]
COLUMNS = ["id", "name", "email", "phone", "city", "grp", "favorite", "newsletter"]


@dataclass
class DesktopTask:
    """One desktop task, in memory: what `write_desktop_task` writes. `actions`: the GUI demonstration;
    `wrong`: a plausible wrong one (solution/wrong.sh sends it); `checks`: {"sql", "rows", "why"} each."""

    instruction: str
    seed: dict[str, list[dict[str, Any]]]
    checks: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    wrong: list[dict[str, Any]] = field(default_factory=list)
    kind: str = ""
    split: str = "train"
    combo: tuple[str, str] = ("", "")
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        blob = json.dumps([self.kind, self.instruction, self.seed], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def task_id(self) -> str:
        return f"{self.kind.replace('_', '-')}-{self.split}-{self.key[:10]}"


# ---- the seed and the checks ---------------------------------------------------------------------------------


def draw_seed(rng: random.Random, n: int = 6) -> dict[str, list[dict[str, Any]]]:
    """An address book: `n` contacts with emails, phones, cities and groups, none a favorite."""
    names = rng.sample(CUSTOMERS, n)
    contacts = [
        {
            "id": i + 1,
            "name": name,
            "email": name.split()[0].lower() + "@" + rng.choice(DOMAINS),
            "phone": f"555-{rng.randrange(1000, 10000)}",
            "city": rng.choice(CITIES),
            "grp": rng.choice(GROUPS),
            "favorite": 0,
            "newsletter": int(rng.random() < 0.5),
        }
        for i, name in enumerate(names)
    ]
    return {"contacts": contacts}


def _row(c: dict[str, Any]) -> list[Any]:
    return [c[k] for k in COLUMNS]


def contact_is(c: dict[str, Any], why: str) -> dict[str, Any]:
    return {
        "sql": f"SELECT {', '.join(COLUMNS)} FROM contacts WHERE name = {_sql(c['name'])}",
        "rows": [_row(c)],
        "why": why,
    }


def others_unchanged(seed: dict[str, list[dict[str, Any]]], skip: int | None = None) -> dict[str, Any]:
    """The seeded contacts but `skip` as seeded, and no contact added beyond the seed's unless one was asked."""
    rows = [_row(c) for c in seed["contacts"] if c["id"] != skip]
    where = f"WHERE id != {skip} AND id <= {len(seed['contacts'])}" if skip else f"WHERE id <= {len(seed['contacts'])}"
    return {
        "sql": f"SELECT {', '.join(COLUMNS)} FROM contacts {where} ORDER BY id",
        "rows": rows,
        "why": "the other contacts are unchanged",
    }


def count_is(n: int) -> dict[str, Any]:
    return {"sql": "SELECT count(*) FROM contacts", "rows": [[n]], "why": f"{n} contacts in all"}


def _sql(s: str) -> str:
    return "'" + s.replace("'", "''") + "'"


def _click(role: str, name: str) -> dict[str, Any]:
    return {"tool": "click", "target": {"role": role, "name": name}}


def _type(name: str, text: str) -> dict[str, Any]:
    return {"tool": "type", "target": {"role": "textbox", "name": name}, "text": text}


def _select(name: str, value: str) -> dict[str, Any]:
    return {"tool": "select", "target": {"role": "combobox", "name": name}, "value": value}


def _subject(rng: random.Random, kind: str, subjects: list[str], split: str) -> str:
    held = heldout_subjects(kind, subjects)
    return rng.choice([s for s in subjects if (s in held) == (split == "heldout")])


# ---- the kinds -----------------------------------------------------------------------------------------------


def desktop_email(rng: random.Random, split: str) -> DesktopTask:
    domain = _subject(rng, "desktop_email", DOMAINS, split)
    seed = draw_seed(rng)
    c = rng.choice(seed["contacts"])
    email = f"{c['name'].split()[-1].lower()}@{domain}"
    if email == c["email"]:
        email = "hello." + email
    return DesktopTask(
        instruction=f"In the Contacts app, change the email address of {c['name']} to {email}.",
        seed=seed,
        checks=[
            contact_is({**c, "email": email}, "the contact's new email, nothing else"),
            others_unchanged(seed, c["id"]),
            count_is(len(seed["contacts"])),
        ],
        actions=[_select("Contact", c["name"]), _type("Email", email), _click("button", "Save")],
        wrong=[_select("Contact", c["name"]), _type("Email", email.upper()), _click("button", "Save")],
        combo=("desktop_email", domain),
        params={"contact": c["name"], "email": email},
    )


def desktop_city(rng: random.Random, split: str) -> DesktopTask:
    city = _subject(rng, "desktop_city", CITIES, split)
    seed = draw_seed(rng)
    c = rng.choice([x for x in seed["contacts"] if x["city"] != city])
    return DesktopTask(
        instruction=f"{c['name']} has moved to {city}: update the city in the Contacts app.",
        seed=seed,
        checks=[
            contact_is({**c, "city": city}, "the contact's new city, nothing else"),
            others_unchanged(seed, c["id"]),
            count_is(len(seed["contacts"])),
        ],
        actions=[_select("Contact", c["name"]), _type("City", city), _click("button", "Save")],
        wrong=[_select("Contact", c["name"]), _type("City", city.lower()), _click("button", "Save")],
        combo=("desktop_city", city),
        params={"contact": c["name"], "city": city},
    )


def desktop_group(rng: random.Random, split: str) -> DesktopTask:
    group = _subject(rng, "desktop_group", GROUPS, split)
    seed = draw_seed(rng)
    c = rng.choice([x for x in seed["contacts"] if x["grp"] != group] or seed["contacts"])
    return DesktopTask(
        instruction=f"In the Contacts app, move {c['name']} to the {group} group and mark them as a favorite.",
        seed=seed,
        checks=[
            contact_is({**c, "grp": group, "favorite": 1}, "the contact's group and favorite, nothing else"),
            others_unchanged(seed, c["id"]),
            count_is(len(seed["contacts"])),
        ],
        actions=[
            _select("Contact", c["name"]),
            _select("Group", group),
            _click("checkbox", "Favorite"),
            _click("button", "Save"),
        ],
        wrong=[_select("Contact", c["name"]), _select("Group", group), _click("button", "Save")],
        combo=("desktop_group", group),
        params={"contact": c["name"], "group": group},
    )


def desktop_new(rng: random.Random, split: str) -> DesktopTask:
    city = _subject(rng, "desktop_new", CITIES, split)
    seed = draw_seed(rng)
    taken = {c["name"] for c in seed["contacts"]}
    name = rng.choice([n for n in CUSTOMERS if n not in taken])
    email = name.split()[0].lower() + "@" + rng.choice(DOMAINS)
    group = rng.choice(GROUPS)
    new = {
        "id": len(seed["contacts"]) + 1,
        "name": name,
        "email": email,
        "phone": "",
        "city": city,
        "grp": group,
        "favorite": 0,
        "newsletter": 0,
    }
    steps = [
        _click("button", "New contact"),
        _type("Name", name),
        _type("Email", email),
        _type("City", city),
        _select("Group", group),
        _click("button", "Save"),
    ]
    return DesktopTask(
        instruction=(
            f"Add a new contact in the Contacts app: {name}, email {email}, city {city}, in the {group} group."
        ),
        seed=seed,
        checks=[
            contact_is(new, "the new contact, as asked"),
            others_unchanged(seed),
            count_is(len(seed["contacts"]) + 1),
        ],
        actions=steps,
        wrong=[*steps[:3], _type("City", city + "ville"), *steps[4:]],
        combo=("desktop_new", city),
        params={"name": name, "email": email, "city": city, "group": group},
    )


DESKTOP_KINDS: dict[str, Callable[[random.Random, str], DesktopTask]] = {
    "desktop_email": desktop_email,
    "desktop_city": desktop_city,
    "desktop_group": desktop_group,
    "desktop_new": desktop_new,
}


def draw_desktop_task(kind: str, rng: random.Random, split: str) -> DesktopTask:
    if split not in ("train", "heldout"):
        raise FamilyError(f"unknown split {split!r}: expected 'train' or 'heldout'")
    if kind not in DESKTOP_KINDS:
        raise FamilyError(f"unknown desktop task kind {kind!r}; known: {', '.join(DESKTOP_KINDS)}")
    task = DESKTOP_KINDS[kind](rng, split)
    task.kind, task.split = kind, split
    return task


# ---- writing -------------------------------------------------------------------------------------------------


def desktop_dockerfile() -> str:
    """A desktop task's Dockerfile: the desktop image, the server, the app and its database made from the seed at
    build time, the seed removed, code and data out of the agent's reach."""
    return f"""FROM {DESKTOP_IMAGE}
WORKDIR /app
# The desktop server and the app (root:deskapp 0750: the agent cannot read them) and the app's database, made from
# the task's seed and owned by the app's user `deskapp` with group root, 0750/0640: the agent (uid 1000) can neither
# read nor write it; the verifier (root without capabilities) reads it through the group. The seed is removed.
COPY desktop/ /opt/desktop/
RUN chown -R root:deskapp /opt/desktop && chmod 0750 /opt/desktop && chmod 0640 /opt/desktop/* \\
 && install -d -m 0750 -o deskapp -g root {DATA_DIR} \\
 && python3 -I /opt/desktop/app.py init /opt/desktop/seed.json {DATA_DIR}/app.db \\
 && rm -f /opt/desktop/seed.json && chown deskapp:root {DATA_DIR}/app.db && chmod 0640 {DATA_DIR}/app.db
"""


TEST_SH = f"""#!/bin/bash
# Hidden verifier of a desktop task: reward 1 iff the app's database (copied from the agent's sandbox: [verifier]
# state_paths) answers every check of expected.json (check.py); nothing the agent says is read.
TESTS="$(cd "$(dirname "$0")" && pwd)"
OUT="${{VERIFIER_DIR:-/logs/verifier}}"
python3 -I "$TESTS/check.py" "$TESTS/expected.json" "${{DESKAPP_DATA:-{DATA_DIR}}}" "$OUT" \\
  || {{ mkdir -p "$OUT" && echo 0 > "$OUT/reward.txt"; }}
"""


def gui_script(steps: list[dict[str, Any]], what: str) -> str:
    """A bash script that sends `steps` (actions.json's) to the desktop server over its socket, each target found
    in a fresh snapshot: GUI operations only, as the agent's user (`$DESKTOP_SOCKET` overrides the socket)."""
    return f"""#!/bin/bash
# {what}
python3 -I - <<'PY'
import json, os, re, socket, sys
PATH = os.environ.get("DESKTOP_SOCKET", {SOCKET!r})
def call(req):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60); s.connect(PATH); s.sendall(json.dumps(req).encode() + b"\\n")
        buf = b""
        while not buf.endswith(b"\\n"):
            chunk = s.recv(1 << 20)
            if not chunk: break
            buf += chunk
    answer = json.loads(buf)
    if "error" in answer: sys.exit("desktop: %s: %s" % (req, answer["error"]))
    return answer
for step in json.loads({json.dumps(json.dumps(steps))}):
    req = {{"op": step["tool"]}}
    req.update({{k: v for k, v in step.items() if k not in ("tool", "target")}})
    if "target" in step:
        text = call({{"op": "snapshot", "budget": 100000}})["text"]
        refs = [m.group(1) for m in re.finditer(r'^\\s*\\[(\\d+)\\] (\\S+) ("(?:[^"\\\\]|\\\\.)*")', text, re.M)
                if m.group(2) == step["target"]["role"] and json.loads(m.group(3)) == step["target"]["name"]]
        if not refs: sys.exit("no %s in:\\n%s" % (step["target"], text))
        req["ref"] = refs[0]
    call(req)
PY
"""


def task_toml(task: DesktopTask, task_id: str, *, author: str, extra_metadata: str = "") -> str:
    gui = f'kind = "desktop"\nsocket = {json.dumps(SOCKET)}\nservice = {json.dumps(SERVICE)}\n'
    return gui_task_toml(
        task_id,
        task.split,
        category="desktop",
        data_dir=DATA_DIR,
        gui=gui,
        author=author,
        extra_metadata=extra_metadata,
    )


def write_desktop_task(
    task: DesktopTask,
    task_dir: str | Path,
    task_id: str | None = None,
    *,
    author: str = "OpenForge generator",
    extra_metadata: str = "",
) -> Path:
    """Write `task` as a Harbor task directory (the module docstring); returns it."""
    d = Path(task_dir)
    if d.exists():
        shutil.rmtree(d)
    tid = task_id or d.name
    env = d / "environment" / "desktop"
    env.mkdir(parents=True)
    (d / "instruction.md").write_text(f"{task.instruction}\n\nThe Contacts app is open on the desktop.\n")
    (d / "task.toml").write_text(task_toml(task, tid, author=author, extra_metadata=extra_metadata))
    (d / "environment" / "Dockerfile").write_text(desktop_dockerfile())
    shutil.copyfile(SERVER_SOURCE, env / "server.py")
    shutil.copyfile(APP_SOURCE, env / "app.py")
    (env / "seed.json").write_text(json.dumps(task.seed, indent=1, ensure_ascii=False) + "\n")
    tests = d / "tests"
    tests.mkdir()
    (tests / "test.sh").write_text(TEST_SH)
    (tests / "test.sh").chmod(0o755)
    shutil.copyfile(CHECK_SOURCE, tests / "check.py")
    (tests / "expected.json").write_text(json.dumps({"checks": task.checks}, indent=1, ensure_ascii=False) + "\n")
    sol = d / "solution"
    sol.mkdir()
    (sol / "actions.json").write_text(json.dumps(task.actions, indent=1, ensure_ascii=False) + "\n")
    scripts = {
        "solve.sh": gui_script(
            task.actions,
            "The demonstration's steps sent to the desktop server (GUI operations, as the agent's user): the "
            "verifier's check that the end state is reachable.",
        )
    }
    if task.wrong:
        scripts["wrong.sh"] = gui_script(task.wrong, "A plausible wrong solution through the GUI: it must score 0.")
    for name, text in scripts.items():
        (sol / name).write_text(text)
        (sol / name).chmod(0o755)
    return d


def generate_desktop_tasks(
    out_dir: str | Path, n: int, seed: int = 0, split: str = "train", kinds: list[str] | None = None
) -> list[Path]:
    """Write `n` distinct desktop tasks (kinds round-robin, all by default) under `out_dir`, named
    `<kind>-<split>-<hash>`; deterministic under `seed`."""
    names = kinds or list(DESKTOP_KINDS)
    return generate_gui_tasks("desktop", out_dir, n, seed, split, names, draw_desktop_task, write_desktop_task)
