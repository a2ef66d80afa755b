"""The web app GUI tasks serve inside their sandbox: a small store back office (products, customers, orders) over
SQLite, with forms, search and filters, and a multi-page flow (a product's page → "Order this product" → the
order form with the product chosen → the new order's page).

Run as a plain file by the sandbox's own python3 (Debian's; Python 3.7 or newer, standard library only), never
imported by OpenForge, which copies it into each web task's environment (`openforge.tasks.families.web`):

    python3 app.py init SEED.json DB     the database from a task's seed (at image build time)
    python3 app.py start                 as root (the task's `[environment.gui] service`): the server started as
                                         the user `webapp` in its own session, returns once it answers
    python3 app.py serve                 the server itself (what `start` runs)

The data lives in /var/lib/webapp (`--data`), owned by `webapp` with group root, mode 0750, files 0640: the
agent's user (uid 1000, "others") can neither read nor write it and reaches the data only through the app over
HTTP; the verifier, root with every capability dropped, reads it through the group. Pages are plain HTML whose
every control has a label, so a browser's accessibility tree names them (textbox "Search", combobox "Status",
button "Save").
"""

from __future__ import annotations

import argparse
import html
import json
import os
import re
import sqlite3
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

DATA_DIR = "/var/lib/webapp"
DB_NAME = "app.db"
PORT = 8080
USER = "webapp"
LOG = "/var/log/webapp.log"
STATUSES = ["Pending", "Paid", "Shipped", "Cancelled"]
SCHEMA = """
CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, email TEXT NOT NULL, city TEXT NOT NULL);
CREATE TABLE products (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, category TEXT NOT NULL,
                       price_cents INTEGER NOT NULL, stock INTEGER NOT NULL, featured INTEGER NOT NULL DEFAULT 0);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     product_id INTEGER NOT NULL REFERENCES products(id), quantity INTEGER NOT NULL,
                     status TEXT NOT NULL, note TEXT NOT NULL DEFAULT '');
"""


# ---- the database ------------------------------------------------------------------------------------------


def init_db(seed_path: str, db_path: str) -> None:
    """A fresh database at `db_path` holding the seed's customers, products and orders (lists of objects with
    the tables' columns; ids given or assigned in order)."""
    with open(seed_path) as f:
        seed = json.load(f)
    if os.path.exists(db_path):
        os.remove(db_path)
    db = sqlite3.connect(db_path)
    db.executescript(SCHEMA)
    for table in ("customers", "products", "orders"):
        for row in seed.get(table, []):
            cols = sorted(row)
            db.execute(
                "INSERT INTO {} ({}) VALUES ({})".format(table, ", ".join(cols), ", ".join("?" * len(cols))),
                [row[c] for c in cols],
            )
    db.commit()
    db.close()


def connect(data: str) -> sqlite3.Connection:
    db = sqlite3.connect(os.path.join(data, DB_NAME), timeout=10)
    db.row_factory = sqlite3.Row
    return db


# ---- pages ---------------------------------------------------------------------------------------------------

E = html.escape
STYLE = (
    "body{font-family:DejaVu Sans,sans-serif;margin:1.5em;max-width:60em}nav a{margin-right:1em}"
    "table{border-collapse:collapse}td,th{border:1px solid #bbb;padding:.2em .6em;text-align:left}"
    "form p{margin:.4em 0}label{display:inline-block;min-width:7em}.alert{color:#a00}"
)


def page(title: str, body: str) -> str:
    nav = (
        '<nav aria-label="Main"><a href="/">Home</a><a href="/products">Products</a><a href="/orders">Orders</a>'
        '<a href="/customers">Customers</a><a href="/orders/new">New order</a></nav>'
    )
    return (
        f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{E(title)} · Store admin</title>'
        f"<style>{STYLE}</style></head><body>{nav}<main><h1>{E(title)}</h1>{body}</main></body></html>"
    )


def money(cents: int) -> str:
    return f"${cents // 100}.{cents % 100:02d}"


def select(name: str, label: str, options: list[tuple[str, str]], chosen: str = "") -> str:
    opts = "".join(
        f'<option value="{E(v)}"{" selected" if v == chosen else ""}>{E(text)}</option>' for v, text in options
    )
    return f'<p><label for="{name}">{E(label)}</label><select id="{name}" name="{name}">{opts}</select></p>'


def textbox(name: str, label: str, value: str = "") -> str:
    field = f'<input type="text" id="{name}" name="{name}" value="{E(value)}">'
    return f'<p><label for="{name}">{E(label)}</label>{field}</p>'


def button(text: str) -> str:
    return f'<p><button type="submit">{E(text)}</button></p>'


def link(href: str, text: str) -> str:
    return f'<a href="{href}">{E(text)}</a>'


def table(headers: list[str], rows: list[list[str]]) -> str:
    if not rows:
        return "<p>Nothing found.</p>"
    head = "".join(f"<th>{E(h)}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def home(db: sqlite3.Connection, q: dict[str, str]) -> str:
    n = {t: db.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("products", "orders", "customers")}
    items = [
        link("/products", "Browse products"),
        link("/orders", "Browse orders"),
        link("/customers", "Browse customers"),
        link("/orders/new", "Create a new order"),
    ]
    return page(
        "Store admin",
        f"<p>{n['products']} products, {n['orders']} orders, {n['customers']} customers.</p>"
        + "<ul>"
        + "".join(f"<li>{i}</li>" for i in items)
        + "</ul>",
    )


def products(db: sqlite3.Connection, q: dict[str, str]) -> str:
    text, category = q.get("q", "").strip(), q.get("category", "")
    cats = [r[0] for r in db.execute("SELECT DISTINCT category FROM products ORDER BY category")]
    rows = db.execute(
        "SELECT * FROM products WHERE name LIKE ? AND (? = '' OR category = ?) ORDER BY name",
        ("%" + text + "%", category, category),
    ).fetchall()
    fields = textbox("q", "Search", text) + select(
        "category", "Category", [("", "All")] + [(c, c) for c in cats], category
    )
    form = f'<form role="search" method="get" action="/products">{fields}{button("Search")}</form>'
    listing = table(
        ["Name", "Category", "Price", "Stock", "Featured"],
        [
            [
                link(f"/products/{r['id']}", r["name"]),
                E(r["category"]),
                money(r["price_cents"]),
                str(r["stock"]),
                "Yes" if r["featured"] else "No",
            ]
            for r in rows
        ],
    )
    return page("Products", form + listing)


def product(db: sqlite3.Connection, pid: int) -> str | None:
    r = db.execute("SELECT * FROM products WHERE id = ?", (pid,)).fetchone()
    if r is None:
        return None
    value, label = ("0", "Remove from featured") if r["featured"] else ("1", "Mark as featured")
    flag = f'<input type="hidden" name="featured" value="{value}"><button type="submit">{label}</button>'
    body = (
        f"<dl><dt>Category</dt><dd>{E(r['category'])}</dd><dt>Price</dt><dd>{money(r['price_cents'])}</dd>"
        f"<dt>Stock</dt><dd>{r['stock']}</dd><dt>Featured</dt><dd>{'Yes' if r['featured'] else 'No'}</dd></dl>"
        f'<form method="post" action="/products/{pid}/featured">{flag}</form>'
        f"<p>{link(f'/orders/new?product={pid}', 'Order this product')}</p>"
    )
    return page(r["name"], body)


ORDER_ROWS = (
    "SELECT o.*, c.name AS customer, p.name AS product FROM orders o JOIN customers c ON c.id = o.customer_id "
    "JOIN products p ON p.id = o.product_id"
)


def orders(db: sqlite3.Connection, q: dict[str, str]) -> str:
    status = q.get("status", "")
    rows = db.execute(ORDER_ROWS + " WHERE ? = '' OR o.status = ? ORDER BY o.id", (status, status)).fetchall()
    choice = select("status", "Status", [("", "All")] + [(s, s) for s in STATUSES], status)
    form = f'<form method="get" action="/orders">{choice}{button("Filter")}</form>'
    listing = table(
        ["Order", "Customer", "Product", "Quantity", "Status"],
        [
            [
                link(f"/orders/{r['id']}", f"Order #{r['id']}"),
                E(r["customer"]),
                E(r["product"]),
                str(r["quantity"]),
                E(r["status"]),
            ]
            for r in rows
        ],
    )
    return page("Orders", form + listing)


def order_form(db: sqlite3.Connection, values: dict[str, str], error: str = "") -> str:
    customers = [(str(r["id"]), r["name"]) for r in db.execute("SELECT id, name FROM customers ORDER BY name")]
    items = [(str(r["id"]), r["name"]) for r in db.execute("SELECT id, name FROM products ORDER BY name")]
    alert = f'<p role="alert" class="alert">{E(error)}</p>' if error else ""
    fields = (
        select("customer", "Customer", [("", "Choose a customer")] + customers, values.get("customer", ""))
        + select("product", "Product", [("", "Choose a product")] + items, values.get("product", ""))
        + textbox("quantity", "Quantity", values.get("quantity", ""))
    )
    return page("New order", f'{alert}<form method="post" action="/orders">{fields}{button("Place order")}</form>')


def create_order(db: sqlite3.Connection, form: dict[str, str]) -> tuple[int | None, str]:
    """(the new order's id, "") or (None, what is wrong with the form)."""
    customer, item, quantity = form.get("customer", ""), form.get("product", ""), form.get("quantity", "").strip()
    if not db.execute("SELECT 1 FROM customers WHERE id = ?", (customer,)).fetchone():
        return None, "Choose a customer."
    if not db.execute("SELECT 1 FROM products WHERE id = ?", (item,)).fetchone():
        return None, "Choose a product."
    if not re.fullmatch(r"[1-9][0-9]{0,3}", quantity):
        return None, "The quantity must be a whole number from 1 to 9999."
    cur = db.execute(
        "INSERT INTO orders (customer_id, product_id, quantity, status) VALUES (?, ?, ?, 'Pending')",
        (int(customer), int(item), int(quantity)),
    )
    db.commit()
    return cur.lastrowid, ""


def order(db: sqlite3.Connection, oid: int) -> str | None:
    r = db.execute(ORDER_ROWS + " WHERE o.id = ?", (oid,)).fetchone()
    if r is None:
        return None
    fields = select("status", "Status", [(s, s) for s in STATUSES], r["status"]) + textbox("note", "Note", r["note"])
    body = (
        f"<dl><dt>Customer</dt><dd>{E(r['customer'])}</dd><dt>Product</dt><dd>{E(r['product'])}</dd>"
        f"<dt>Quantity</dt><dd>{r['quantity']}</dd><dt>Status</dt><dd>{E(r['status'])}</dd></dl>"
        f'<form method="post" action="/orders/{oid}">{fields}{button("Save")}</form>'
    )
    return page(f"Order #{oid}", body)


def customers(db: sqlite3.Connection, q: dict[str, str]) -> str:
    text = q.get("q", "").strip()
    rows = db.execute("SELECT * FROM customers WHERE name LIKE ? ORDER BY name", ("%" + text + "%",)).fetchall()
    form = (
        f'<form role="search" method="get" action="/customers">{textbox("q", "Search", text)}{button("Search")}</form>'
    )
    listing = table(
        ["Name", "Email", "City"],
        [[link(f"/customers/{r['id']}", r["name"]), E(r["email"]), E(r["city"])] for r in rows],
    )
    return page("Customers", form + listing)


def customer(db: sqlite3.Connection, cid: int) -> str | None:
    r = db.execute("SELECT * FROM customers WHERE id = ?", (cid,)).fetchone()
    if r is None:
        return None
    mine = db.execute(
        "SELECT o.id, o.status, p.name FROM orders o JOIN products p ON p.id = o.product_id WHERE o.customer_id = ? "
        "ORDER BY o.id",
        (cid,),
    ).fetchall()
    theirs = table(
        ["Order", "Product", "Status"], [[link(f"/orders/{o[0]}", f"Order #{o[0]}"), E(o[2]), E(o[1])] for o in mine]
    )
    body = (
        f"<dl><dt>Email</dt><dd>{E(r['email'])}</dd></dl>"
        f'<form method="post" action="/customers/{cid}">{textbox("city", "City", r["city"])}{button("Save")}</form>'
        f"<h2>Orders</h2>{theirs}"
    )
    return page(r["name"], body)


# ---- the server ---------------------------------------------------------------------------------------------


class Handler(BaseHTTPRequestHandler):
    data = DATA_DIR
    server_version = "StoreAdmin/1"

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        sys.stderr.write(f"{self.log_date_time_string()} {format % args}\n")

    def _send(self, status: int, body: str = "", location: str = "") -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        if location:
            self.send_header("Location", location)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-store")
        self.end_headers()
        self.wfile.write(data)

    def _route(self) -> tuple[str, dict[str, str]]:
        url = urllib.parse.urlsplit(self.path)
        return url.path.rstrip("/") or "/", dict(urllib.parse.parse_qsl(url.query))

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        path, q = self._route()
        db = connect(self.data)
        try:
            body: str | None = None
            if path == "/":
                body = home(db, q)
            elif path == "/products":
                body = products(db, q)
            elif path == "/orders":
                body = orders(db, q)
            elif path == "/orders/new":
                body = order_form(db, q)
            elif path == "/customers":
                body = customers(db, q)
            else:
                m = re.fullmatch(r"/(products|orders|customers)/([0-9]{1,9})", path)
                if m:
                    show = {"products": product, "orders": order, "customers": customer}[m.group(1)]
                    body = show(db, int(m.group(2)))
            if body is None:
                self._send(404, page("Not found", "<p>There is no such page.</p>"))
            else:
                self._send(200, body)
        finally:
            db.close()

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        path, _ = self._route()
        size = min(int(self.headers.get("Content-Length") or 0), 1 << 16)
        form = dict(urllib.parse.parse_qsl(self.rfile.read(size).decode("utf-8", "replace"), keep_blank_values=True))
        db = connect(self.data)
        try:
            if path == "/orders":
                oid, error = create_order(db, form)
                if oid is None:
                    self._send(400, order_form(db, form, error))
                else:
                    self._send(303, location=f"/orders/{oid}")
                return
            m = re.fullmatch(r"/products/([0-9]{1,9})/featured", path)
            if m and form.get("featured") in ("0", "1"):
                db.execute("UPDATE products SET featured = ? WHERE id = ?", (int(form["featured"]), int(m.group(1))))
                db.commit()
                self._send(303, location=f"/products/{m.group(1)}")
                return
            m = re.fullmatch(r"/orders/([0-9]{1,9})", path)
            if m and form.get("status") in STATUSES:
                db.execute(
                    "UPDATE orders SET status = ?, note = ? WHERE id = ?",
                    (form["status"], form.get("note", "").strip()[:500], int(m.group(1))),
                )
                db.commit()
                self._send(303, location=f"/orders/{m.group(1)}")
                return
            m = re.fullmatch(r"/customers/([0-9]{1,9})", path)
            if m and form.get("city", "").strip():
                db.execute("UPDATE customers SET city = ? WHERE id = ?", (form["city"].strip()[:100], int(m.group(1))))
                db.commit()
                self._send(303, location=f"/customers/{m.group(1)}")
                return
            self._send(400, page("Bad request", "<p>The form was not filled in as this page expects.</p>"))
        finally:
            db.close()


def serve(data: str, port: int) -> None:
    os.umask(0o027)  # the journal and any new file: webapp's, readable by group root (the verifier), no others
    Handler.data = data
    server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    server.daemon_threads = True
    server.serve_forever()


def answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def start(data: str, port: int, user: str, log: str, wait_s: float) -> int:
    """Start `serve` as `user` in its own session (no capability, a clean environment, output to `log`), and
    wait until it answers; 0, or 1 with the reason on stderr."""
    if os.geteuid() != 0:
        sys.stderr.write(f"app.py start runs as root (the task's service), to start the server as {user}\n")
        return 1
    if not os.path.isfile(os.path.join(data, DB_NAME)):
        sys.stderr.write(f"no database at {data}: the task's image must run `app.py init` when it is built\n")
        return 1
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    argv = ["setpriv", "--reuid", user, "--regid", user, "--init-groups", "--inh-caps=-all", "--bounding-set=-all"]
    argv += ["--", sys.executable, "-I", "-B", os.path.abspath(__file__), "serve", "--data", data, "--port", str(port)]
    env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8", "HOME": data}
    proc = subprocess.Popen(
        argv, stdin=subprocess.DEVNULL, stdout=fd, stderr=fd, env=env, cwd="/", start_new_session=True
    )
    os.close(fd)
    url = f"http://127.0.0.1:{port}/"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.stderr.write(f"the web app exited with status {proc.returncode}; its log ({log}):\n{tail(log)}")
            return 1
        if answers(url):
            return 0
        time.sleep(0.1)
    sys.stderr.write(f"the web app did not answer on {url} within {wait_s:g}s; its log ({log}):\n{tail(log)}")
    return 1


def tail(path: str, n: int = 2000) -> str:
    try:
        with open(path, "rb") as f:
            return f.read()[-n:].decode("utf-8", "replace")
    except OSError as e:
        return str(e)


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="app.py", description="The store back office of OpenForge's web tasks.")
    sub = ap.add_subparsers(dest="command")
    i = sub.add_parser("init")
    i.add_argument("seed")
    i.add_argument("db")
    for name in ("start", "serve"):
        s = sub.add_parser(name)
        s.add_argument("--data", default=DATA_DIR)
        s.add_argument("--port", type=int, default=PORT)
        if name == "start":
            s.add_argument("--user", default=USER)
            s.add_argument("--log", default=LOG)
            s.add_argument("--wait", type=float, default=30.0)
    a = ap.parse_args(argv)
    if a.command == "init":
        init_db(a.seed, a.db)
        return 0
    if a.command == "start":
        return start(a.data, a.port, a.user, a.log, a.wait)
    if a.command == "serve":
        serve(a.data, a.port)
        return 0
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
