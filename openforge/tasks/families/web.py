"""The web task family: GUI tasks on the store back office every web task serves inside its sandbox
(`web_app.py`), done through a browser and graded on the app's database (docs/design.md, "GUI tasks").

Each instance is a Harbor task directory (`write_web_task`):

    instruction.md        the goal, every value the agent needs named in it
    task.toml             [environment.gui] (start_url, the service that starts the app), [verifier] state_paths =
                          ["/var/lib/webapp"], [agent] user = "agent"
    environment/          Dockerfile FROM openforge-gui:bookworm; webapp/app.py (this package's web_app.py) and
                          the instance's seed.json, made into the database when the image is built
    tests/                test.sh → check.py (web_check.py) with expected.json: SQL queries on the app's database
                          and the rows they must give (the change asked for, and nothing else changed)
    solution/actions.json the GUI demonstration: the oracle's browser steps ({"tool", "target": {role, name}, ...})
    solution/solve.sh     the same end state over HTTP (python3 urllib): only the verifier's check that the state
                          is reachable, never the demonstration; wrong.sh a plausible wrong one

The kinds (`WEB_KINDS`), 2–4 GUI steps each, so that a small model can learn them:

    web_order    start at the order form: choose the customer and the product, type the quantity, place the order
    web_feature  start at the products: search for a product by name, open it, mark it as featured
    web_status   start at the orders: open an order, choose its new status, save
    web_city     start at the customers: open a customer, type the new city, save

Splits, as for the file families (`language.py`): each kind's (kind, subject) combinations — the product's
category, the new status, the city — are divided once by a fixed hash into train and held-out ones (about a
quarter held out), and numbers copied from the instruction (quantities, order numbers) by value
(`is_heldout_number`). A held-out instance uses only held-out combinations and values.
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

from openforge.tasks.families.language import HELDOUT_FRACTION, FamilyError, is_heldout_number

__all__ = [
    "APP_SOURCE",
    "CHECK_SOURCE",
    "DATA_DIR",
    "GUI_IMAGE",
    "ORIGIN",
    "WEB_KINDS",
    "WebTask",
    "draw_web_task",
    "generate_gui_tasks",
    "generate_web_tasks",
    "heldout_subjects",
    "web_dockerfile",
    "write_web_task",
]

GUI_IMAGE = "openforge-gui:bookworm"
ORIGIN = "http://127.0.0.1:8080"
DATA_DIR = "/var/lib/webapp"
APP_SOURCE = Path(__file__).with_name("web_app.py")
CHECK_SOURCE = Path(__file__).with_name("web_check.py")
SERVICE = "python3 -I /opt/webapp/app.py start"

CUSTOMERS = [
    "Ada Lovelace",
    "Grace Hopper",
    "Alan Turing",
    "Katherine Johnson",
    "Edsger Dijkstra",
    "Barbara Liskov",
    "Donald Knuth",
    "Margaret Hamilton",
    "Claude Shannon",
    "Frances Allen",
    "John Backus",
    "Hedy Lamarr",
]
CITIES = ["Lisbon", "Oslo", "Porto", "Quito", "Dakar", "Hanoi", "Lima", "Perth", "Turin", "Bergen", "Leeds", "Kyoto"]
PRODUCTS = {
    "Keyboards": ["Compact Keyboard", "Mechanical Keyboard", "Ergo Keyboard", "Travel Keyboard"],
    "Mice": ["Trackball Mouse", "Wireless Mouse", "Gaming Mouse", "Vertical Mouse"],
    "Monitors": ["Wide Monitor", "Portable Monitor", "Office Monitor", "Curved Monitor"],
    "Cables": ["USB-C Cable", "HDMI Cable", "Network Cable", "Power Cable"],
    "Lamps": ["Desk Lamp", "Clip Lamp", "Floor Lamp", "Reading Lamp"],
    "Chairs": ["Office Chair", "Stool", "Kneeling Chair", "Armchair"],
}
STATUSES = ["Pending", "Paid", "Shipped", "Cancelled"]


@dataclass
class WebTask:
    """One web task, in memory: what `write_web_task` writes. `requests`: the reference solution's HTTP requests
    (method, path, form); `wrong`: a plausible wrong solution's; `checks`: {"sql", "rows", "why"} each."""

    instruction: str
    seed: dict[str, list[dict[str, Any]]]
    checks: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    requests: list[tuple[str, str, dict[str, str]]]
    wrong: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    start_path: str = "/"
    kind: str = ""
    split: str = "train"
    combo: tuple[str, str] = ("", "")
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def key(self) -> str:
        """Identity: the kind, instruction and seed (what the agent is shown and starts from)."""
        blob = json.dumps([self.kind, self.instruction, self.seed], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def task_id(self) -> str:
        return f"{self.kind.replace('_', '-')}-{self.split}-{self.key[:10]}"


# ---- the seed ------------------------------------------------------------------------------------------------


def draw_seed(rng: random.Random, n_customers: int = 6, n_orders: int = 6) -> dict[str, list[dict[str, Any]]]:
    """A store: customers with cities, every product (prices and stock drawn, some featured), a few orders."""
    names = rng.sample(CUSTOMERS, n_customers)
    customers = [
        {"id": i + 1, "name": n, "email": n.split()[0].lower() + "@example.com", "city": rng.choice(CITIES)}
        for i, n in enumerate(names)
    ]
    products: list[dict[str, Any]] = []
    for cat, items in PRODUCTS.items():
        for name in items:
            products.append(
                {
                    "id": len(products) + 1,
                    "name": name,
                    "category": cat,
                    "price_cents": rng.randrange(5, 400) * 100 + rng.choice([0, 50, 99]),
                    "stock": rng.randrange(0, 60),
                    "featured": int(rng.random() < 0.2),
                }
            )
    orders = [
        {
            "id": i + 1,
            "customer_id": rng.randrange(1, n_customers + 1),
            "product_id": rng.randrange(1, len(products) + 1),
            "quantity": rng.randrange(1, 6),
            "status": rng.choice(STATUSES),
            "note": "",
        }
        for i in range(n_orders)
    ]
    return {"customers": customers, "products": products, "orders": orders}


def _rows(seed: dict[str, list[dict[str, Any]]], table: str, cols: list[str]) -> list[list[Any]]:
    return [[r[c] for c in cols] for r in sorted(seed[table], key=lambda r: r["id"])]


ORDER_COLS = ["id", "customer_id", "product_id", "quantity", "status", "note"]
PRODUCT_COLS = ["id", "name", "category", "price_cents", "stock", "featured"]
CUSTOMER_COLS = ["id", "name", "email", "city"]


def unchanged(
    seed: dict[str, list[dict[str, Any]]], table: str, cols: list[str], skip: int | None = None
) -> dict[str, Any]:
    """A check that `table`'s seeded rows (but the one of id `skip`) are as seeded: nothing else was changed."""
    last = max(r["id"] for r in seed[table])
    where = f"id <= {last}" + (f" AND id != {skip}" if skip is not None else "")
    return {
        "sql": f"SELECT {', '.join(cols)} FROM {table} WHERE {where} ORDER BY id",
        "rows": [r for r in _rows(seed, table, cols) if r[0] != skip],
        "why": f"the other {table} are unchanged",
    }


# ---- the kinds -----------------------------------------------------------------------------------------------


def heldout_subjects(kind: str, subjects: list[str]) -> set[str]:
    """About a quarter of a kind's subjects, chosen by a fixed hash (the split of its combinations)."""
    ranked = sorted(subjects, key=lambda s: hashlib.sha256(f"{kind}|{s}".encode()).hexdigest())
    return set(ranked[: max(1, round(len(subjects) * HELDOUT_FRACTION))])


def _subject(rng: random.Random, kind: str, subjects: list[str], split: str) -> str:
    held = heldout_subjects(kind, subjects)
    return rng.choice([s for s in subjects if (s in held) == (split == "heldout")])


def _number(rng: random.Random, lo: int, hi: int, split: str) -> int:
    return rng.choice([n for n in range(lo, hi + 1) if is_heldout_number(n) == (split == "heldout")])


def web_order(rng: random.Random, split: str) -> WebTask:
    category = _subject(rng, "web_order", list(PRODUCTS), split)
    seed = draw_seed(rng)
    item = rng.choice([p for p in seed["products"] if p["category"] == category])
    cust = rng.choice(seed["customers"])
    qty = _number(rng, 2, 30, split)
    new_id = len(seed["orders"]) + 1
    form = {"customer": str(cust["id"]), "product": str(item["id"]), "quantity": str(qty)}
    return WebTask(
        instruction=f"Order {qty} units of {item['name']} for the customer {cust['name']}.",
        seed=seed,
        checks=[
            {
                "sql": "SELECT c.name, p.name, o.quantity, o.status FROM orders o JOIN customers c ON c.id = "
                f"o.customer_id JOIN products p ON p.id = o.product_id WHERE o.id >= {new_id} ORDER BY o.id",
                "rows": [[cust["name"], item["name"], qty, "Pending"]],
                "why": "one new order, of the right customer, product and quantity",
            },
            unchanged(seed, "orders", ORDER_COLS),
        ],
        actions=[
            _select("Customer", cust["name"]),
            _select("Product", item["name"]),
            _type("Quantity", str(qty)),
            _click("button", "Place order"),
        ],
        requests=[("POST", "/orders", form)],
        wrong=[("POST", "/orders", {**form, "quantity": str(qty + 1)})],
        start_path="/orders/new",
        combo=("web_order", category),
        params={"customer": cust["name"], "product": item["name"], "quantity": qty},
    )


def web_feature(rng: random.Random, split: str) -> WebTask:
    category = _subject(rng, "web_feature", list(PRODUCTS), split)
    seed = draw_seed(rng)
    item = rng.choice([p for p in seed["products"] if p["category"] == category])
    item["featured"] = 0  # the task is to feature it
    other = rng.choice([p for p in seed["products"] if p["id"] != item["id"] and not p["featured"]])
    return WebTask(
        instruction=f"Find the product {item['name']} and mark it as featured.",
        seed=seed,
        checks=[
            {
                "sql": f"SELECT featured FROM products WHERE id = {item['id']}",
                "rows": [[1]],
                "why": f"{item['name']} is featured",
            },
            unchanged(seed, "products", PRODUCT_COLS, item["id"]),
        ],
        actions=[
            _type("Search", item["name"]),
            _click("button", "Search"),
            _click("link", item["name"]),
            _click("button", "Mark as featured"),
        ],
        requests=[("POST", f"/products/{item['id']}/featured", {"featured": "1"})],
        wrong=[("POST", f"/products/{other['id']}/featured", {"featured": "1"})],
        start_path="/products",
        combo=("web_feature", category),
        params={"product": item["name"]},
    )


def web_status(rng: random.Random, split: str) -> WebTask:
    status = _subject(rng, "web_status", STATUSES, split)
    seed = draw_seed(rng, n_orders=30)
    number = _number(rng, 1, 30, split)
    target = seed["orders"][number - 1]
    target["status"] = rng.choice([s for s in STATUSES if s != status])
    return WebTask(
        instruction=f"Set the status of Order #{number} to {status}.",
        seed=seed,
        checks=[
            {
                "sql": f"SELECT status, note FROM orders WHERE id = {number}",
                "rows": [[status, ""]],
                "why": f"Order #{number} is {status}",
            },
            unchanged(seed, "orders", ORDER_COLS, number),
        ],
        actions=[_click("link", f"Order #{number}"), _select("Status", status), _click("button", "Save")],
        requests=[("POST", f"/orders/{number}", {"status": status, "note": ""})],
        wrong=[("POST", f"/orders/{number % 30 + 1}", {"status": status, "note": ""})],
        start_path="/orders",
        combo=("web_status", status),
        params={"order": number, "status": status},
    )


def web_city(rng: random.Random, split: str) -> WebTask:
    city = _subject(rng, "web_city", CITIES, split)
    seed = draw_seed(rng)
    cust = rng.choice(seed["customers"])
    cust["city"] = rng.choice([c for c in CITIES if c != city])
    return WebTask(
        instruction=f"The customer {cust['name']} has moved to {city}: change their city.",
        seed=seed,
        checks=[
            {
                "sql": f"SELECT city FROM customers WHERE id = {cust['id']}",
                "rows": [[city]],
                "why": f"{cust['name']} lives in {city}",
            },
            unchanged(seed, "customers", CUSTOMER_COLS, cust["id"]),
        ],
        actions=[_click("link", cust["name"]), _type("City", city), _click("button", "Save")],
        requests=[("POST", f"/customers/{cust['id']}", {"city": city})],
        wrong=[("POST", f"/customers/{cust['id']}", {"city": city.lower()})],
        start_path="/customers",
        combo=("web_city", city),
        params={"customer": cust["name"], "city": city},
    )


WEB_KINDS: dict[str, Callable[[random.Random, str], WebTask]] = {
    "web_order": web_order,
    "web_feature": web_feature,
    "web_status": web_status,
    "web_city": web_city,
}


def _click(role: str, name: str) -> dict[str, Any]:
    return {"tool": "click", "target": {"role": role, "name": name}}


def _type(name: str, text: str) -> dict[str, Any]:
    return {"tool": "type", "target": {"role": "textbox", "name": name}, "text": text}


def _select(name: str, value: str) -> dict[str, Any]:
    return {"tool": "select", "target": {"role": "combobox", "name": name}, "value": value}


def draw_web_task(kind: str, rng: random.Random, split: str) -> WebTask:
    if split not in ("train", "heldout"):
        raise FamilyError(f"unknown split {split!r}: expected 'train' or 'heldout'")
    if kind not in WEB_KINDS:
        raise FamilyError(f"unknown web task kind {kind!r}; known: {', '.join(WEB_KINDS)}")
    task = WEB_KINDS[kind](rng, split)
    task.kind, task.split = kind, split
    return task


# ---- writing -------------------------------------------------------------------------------------------------


def web_dockerfile() -> str:
    """A web task's Dockerfile: the GUI image, the app and its database made from the seed at build time, the
    seed removed, the code and the data out of the agent's reach."""
    return f"""FROM {GUI_IMAGE}
WORKDIR /app
# The app (root:webapp 0750: the agent cannot read its code) and its database, made from the task's seed and owned
# by the app's user `webapp` with group root, 0750/0640: the agent (uid 1000) can neither read nor write it; the
# verifier (root without capabilities) reads it through the group. The seed is removed once used.
COPY webapp/ /opt/webapp/
RUN chown -R root:webapp /opt/webapp && chmod 0750 /opt/webapp && chmod 0640 /opt/webapp/* \\
 && install -d -m 0750 -o webapp -g root {DATA_DIR} \\
 && python3 -I /opt/webapp/app.py init /opt/webapp/seed.json {DATA_DIR}/app.db \\
 && rm -f /opt/webapp/seed.json && chown webapp:root {DATA_DIR}/app.db && chmod 0640 {DATA_DIR}/app.db
"""


TEST_SH = f"""#!/bin/bash
# Hidden verifier of a web task: reward 1 iff the app's database (copied from the agent's sandbox: [verifier]
# state_paths) answers every check of expected.json (check.py); nothing the agent says is read.
TESTS="$(cd "$(dirname "$0")" && pwd)"
OUT="${{VERIFIER_DIR:-/logs/verifier}}"
python3 -I "$TESTS/check.py" "$TESTS/expected.json" "${{WEBAPP_DATA:-{DATA_DIR}}}" "$OUT" \\
  || {{ mkdir -p "$OUT" && echo 0 > "$OUT/reward.txt"; }}
"""


def http_script(requests: list[tuple[str, str, dict[str, str]]], what: str) -> str:
    """A bash script that sends `requests` to the app with python3's urllib (following its redirects);
    `$WEBAPP_URL` overrides the app's origin."""
    steps = json.dumps([[m, p, f] for m, p, f in requests])
    return f"""#!/bin/bash
# {what}
python3 -I - <<'PY'
import json, os, urllib.parse, urllib.request
origin = os.environ.get("WEBAPP_URL", {ORIGIN!r})
for method, path, form in json.loads({steps!r}):
    data = urllib.parse.urlencode(form).encode() if method == "POST" else None
    req = urllib.request.Request(origin + path, data=data, method=method)
    with urllib.request.urlopen(req, timeout=30) as r:
        r.read()
PY
"""


def _toml_str(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def gui_task_toml(
    task_id: str, split: str, *, category: str, data_dir: str, gui: str, author: str, extra_metadata: str = ""
) -> str:
    """A GUI task's task.toml (web and desktop families): `gui` is the `[environment.gui]` table's body."""
    return f"""version = "1.0"

[metadata]
author_name = {_toml_str(author)}
difficulty = "easy"
category = "{category}"
tags = ["gui", "{category}"]
id = {_toml_str(task_id)}
split = "{split}"
kind = "gui"
{extra_metadata}
[verifier]
timeout_sec = 60.0
# the app's data: grading copies it from the agent's sandbox into the grader, where check.py reads it
state_paths = [{_toml_str(data_dir)}]

[agent]
timeout_sec = 300.0
user = "agent"

[environment]
build_timeout_sec = 300.0
cpus = 1
memory_mb = 2048
pids_limit = 512
allow_internet = false

[environment.gui]
{gui}"""


def task_toml(task: WebTask, task_id: str, *, author: str, extra_metadata: str = "") -> str:
    gui = f'kind = "web"\nstart_url = {_toml_str(ORIGIN + task.start_path)}\nservice = {_toml_str(SERVICE)}\n'
    return gui_task_toml(
        task_id, task.split, category="web", data_dir=DATA_DIR, gui=gui, author=author, extra_metadata=extra_metadata
    )


def write_web_task(
    task: WebTask,
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
    app = d / "environment" / "webapp"
    app.mkdir(parents=True)
    (d / "instruction.md").write_text(
        f"{task.instruction}\n\nUse the store's web site in the browser; it opens at {ORIGIN + task.start_path}.\n"
    )
    (d / "task.toml").write_text(task_toml(task, tid, author=author, extra_metadata=extra_metadata))
    (d / "environment" / "Dockerfile").write_text(web_dockerfile())
    shutil.copyfile(APP_SOURCE, app / "app.py")
    (app / "seed.json").write_text(json.dumps(task.seed, indent=1, ensure_ascii=False) + "\n")
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
        "solve.sh": http_script(
            task.requests,
            "The end state over HTTP: only the verifier's check that it is reachable. The GUI demonstration is "
            "actions.json.",
        )
    }
    if task.wrong:
        scripts["wrong.sh"] = http_script(task.wrong, "A plausible wrong solution over HTTP: it must score 0.")
    for name, text in scripts.items():
        (sol / name).write_text(text)
        (sol / name).chmod(0o755)
    return d


def generate_web_tasks(
    out_dir: str | Path, n: int, seed: int = 0, split: str = "train", kinds: list[str] | None = None
) -> list[Path]:
    """Write `n` distinct web tasks (kinds round-robin, all by default) under `out_dir`, named
    `<kind>-<split>-<hash>`; deterministic under `seed`."""
    return generate_gui_tasks("web", out_dir, n, seed, split, kinds or list(WEB_KINDS), draw_web_task, write_web_task)


def generate_gui_tasks(
    label: str,
    out_dir: str | Path,
    n: int,
    seed: int,
    split: str,
    names: list[str],
    draw: Callable[[str, random.Random, str], Any],
    write: Callable[..., Path],
) -> list[Path]:
    """The drawing loop of a GUI family (web, desktop): `n` distinct tasks of `names` round-robin, each drawn by
    `draw(kind, rng, split)` (a task with `key`, `kind`, `combo`, `task_id()`) and written by `write(task, dir,
    id, extra_metadata=...)`; deterministic under `seed`."""
    out = Path(out_dir)
    if out.name in ("train", "heldout") and out.name != split:
        raise FamilyError(f"{out}: a {out.name!r} directory cannot hold {split!r} tasks")
    rng = random.Random(f"openforge-{label}:{seed}:{split}")
    out.mkdir(parents=True, exist_ok=True)
    paths: list[Path] = []
    seen: set[str] = set()
    attempts = 0
    while len(paths) < n:
        attempts += 1
        if attempts > 50 * n + 100:
            raise FamilyError(f"could draw only {len(paths)} distinct {label} tasks ({split})")
        task = draw(names[attempts % len(names)], rng, split)
        if task.key in seen:
            continue
        seen.add(task.key)
        tid = task.task_id()
        meta = f'family = "{task.kind}"\ncombo = {json.dumps(list(task.combo))}\nseed = {seed}\n'
        paths.append(write(task, out / tid, tid, extra_metadata=meta))
    return paths
