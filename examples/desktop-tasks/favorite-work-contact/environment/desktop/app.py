"""The desktop app of desktop GUI tasks: "Contacts", a small GTK 3 address book over SQLite (a contact chosen in a
drop-down, its fields in text boxes, a group drop-down, two check boxes, Save and New contact buttons).

Run as a plain file by the sandbox's own python3 (Debian's, python3-gi with GTK 3 from the desktop image), never
imported by OpenForge, which copies it into each desktop task's environment (`openforge.tasks.families.desktop`):

    python3 app.py init SEED.json DB     the database from a task's seed (at image build time; no GTK needed)
    python3 app.py run [--data DIR]      the window (the desktop server starts it as `deskapp` on its display)

The data lives in /var/lib/deskapp (owned by `deskapp`, group root, 0750, files 0640): the agent's user can
neither read nor write it and changes it only through this window, which it reaches only through the desktop
server's GUI operations; the verifier, root without capabilities, reads it through the group. Every control has
an accessible name (what its label says), so the accessibility tree names them: combobox "Contact",
textbox "Email", checkbox "Favorite", button "Save".
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import sys
from typing import Any

DATA_DIR = "/var/lib/deskapp"
DB_NAME = "app.db"
GROUPS = ["Family", "Friends", "Work", "Other"]
FIELDS = ["name", "email", "phone", "city"]
SCHEMA = """
CREATE TABLE contacts (id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, email TEXT NOT NULL DEFAULT '',
                       phone TEXT NOT NULL DEFAULT '', city TEXT NOT NULL DEFAULT '',
                       grp TEXT NOT NULL DEFAULT 'Other', favorite INTEGER NOT NULL DEFAULT 0,
                       newsletter INTEGER NOT NULL DEFAULT 0);
"""
COLUMNS = ["id", "name", "email", "phone", "city", "grp", "favorite", "newsletter"]


def init_db(seed_path: str, db_path: str) -> None:
    """A fresh database at `db_path` holding the seed's contacts (objects with the table's columns)."""
    with open(seed_path) as f:
        seed = json.load(f)
    if os.path.exists(db_path):
        os.unlink(db_path)
    db = sqlite3.connect(db_path)
    try:
        db.executescript(SCHEMA)
        for i, c in enumerate(seed["contacts"]):
            row = {"id": i + 1, "email": "", "phone": "", "city": "", "grp": "Other", "favorite": 0, "newsletter": 0}
            row.update(c)
            db.execute(
                f"INSERT INTO contacts ({', '.join(COLUMNS)}) VALUES ({', '.join('?' * len(COLUMNS))})",
                [row[k] for k in COLUMNS],
            )
        db.commit()
    finally:
        db.close()


class Store:
    def __init__(self, path: str):
        self.path = path

    def _db(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=5)

    def names(self) -> list[str]:
        db = self._db()
        try:
            return [r[0] for r in db.execute("SELECT name FROM contacts ORDER BY name")]
        finally:
            db.close()

    def get(self, name: str) -> dict[str, Any] | None:
        db = self._db()
        try:
            row = db.execute(f"SELECT {', '.join(COLUMNS)} FROM contacts WHERE name = ?", (name,)).fetchone()
            return dict(zip(COLUMNS, row)) if row else None
        finally:
            db.close()

    def save(self, contact_id: int | None, values: dict[str, Any]) -> None:
        db = self._db()
        try:
            cols = [c for c in COLUMNS if c != "id"]
            if contact_id is None:
                db.execute(
                    f"INSERT INTO contacts ({', '.join(cols)}) VALUES ({', '.join('?' * len(cols))})",
                    [values[c] for c in cols],
                )
            else:
                db.execute(
                    f"UPDATE contacts SET {', '.join(c + ' = ?' for c in cols)} WHERE id = ?",
                    [values[c] for c in cols] + [contact_id],
                )
            db.commit()
        finally:
            db.close()


def run(data: str) -> int:
    import gi

    gi.require_version("Gtk", "3.0")
    from gi.repository import Gtk

    store = Store(os.path.join(data, DB_NAME))
    state: dict[str, Any] = {"id": None, "loading": False}

    win = Gtk.Window(title="Contacts")
    win.set_default_size(720, 520)
    win.connect("destroy", Gtk.main_quit)
    grid = Gtk.Grid(column_spacing=12, row_spacing=8, margin=16)
    win.add(grid)

    def named(widget: Any, name: str) -> Any:
        widget.get_accessible().set_name(name)
        return widget

    def row(label: str, widget: Any, r: int) -> Any:
        lab = Gtk.Label(label=label, xalign=0)
        lab.set_mnemonic_widget(widget)
        grid.attach(lab, 0, r, 1, 1)
        grid.attach(named(widget, label), 1, r, 1, 1)
        widget.set_hexpand(True)
        return widget

    contact = row("Contact", Gtk.ComboBoxText(), 0)
    new_button = named(Gtk.Button(label="New contact"), "New contact")
    grid.attach(new_button, 2, 0, 1, 1)
    entries = {f: row(f.capitalize(), Gtk.Entry(), i + 1) for i, f in enumerate(FIELDS)}
    group = row("Group", Gtk.ComboBoxText(), len(FIELDS) + 1)
    for g in GROUPS:
        group.append_text(g)
    favorite = named(Gtk.CheckButton(label="Favorite"), "Favorite")
    newsletter = named(Gtk.CheckButton(label="Newsletter"), "Newsletter")
    grid.attach(favorite, 1, len(FIELDS) + 2, 1, 1)
    grid.attach(newsletter, 1, len(FIELDS) + 3, 1, 1)
    save = named(Gtk.Button(label="Save"), "Save")
    grid.attach(save, 1, len(FIELDS) + 4, 1, 1)
    status = Gtk.Label(label="Choose a contact, or make a new one.", xalign=0)
    grid.attach(status, 1, len(FIELDS) + 5, 2, 1)

    def fill(c: dict[str, Any] | None) -> None:
        state["loading"] = True
        state["id"] = c["id"] if c else None
        for f, e in entries.items():
            e.set_text(str(c[f]) if c else "")
        group.set_active(GROUPS.index(c["grp"]) if c and c["grp"] in GROUPS else -1)
        favorite.set_active(bool(c and c["favorite"]))
        newsletter.set_active(bool(c and c["newsletter"]))
        state["loading"] = False

    def reload_names(select: str | None) -> None:
        state["loading"] = True
        contact.remove_all()
        names = store.names()
        for n in names:
            contact.append_text(n)
        contact.set_active(names.index(select) if select in names else -1)
        state["loading"] = False

    def on_contact(_: Any) -> None:
        if state["loading"]:
            return
        name = contact.get_active_text()
        fill(store.get(name) if name else None)
        status.set_text(f"Editing {name}." if name else "")

    def on_new(_: Any) -> None:
        state["loading"] = True
        contact.set_active(-1)
        state["loading"] = False
        fill(None)
        status.set_text("New contact: fill in the fields and save.")

    def on_save(_: Any) -> None:
        values: dict[str, Any] = {f: e.get_text().strip() for f, e in entries.items()}
        values["grp"] = group.get_active_text() or "Other"
        values["favorite"] = int(favorite.get_active())
        values["newsletter"] = int(newsletter.get_active())
        if not values["name"]:
            status.set_text("Not saved: a contact needs a name.")
            return
        try:
            store.save(state["id"], values)
        except sqlite3.IntegrityError:
            status.set_text(f"Not saved: there is already a contact named {values['name']}.")
            return
        reload_names(values["name"])
        saved = store.get(values["name"])
        state["id"] = saved["id"] if saved else None
        status.set_text(f"Saved {values['name']}.")

    contact.connect("changed", on_contact)
    new_button.connect("clicked", on_new)
    save.connect("clicked", on_save)
    reload_names(None)
    win.show_all()
    Gtk.main()
    return 0


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="app.py", description="Contacts: the desktop app of OpenForge's desktop tasks.")
    sub = ap.add_subparsers(dest="command")
    i = sub.add_parser("init")
    i.add_argument("seed")
    i.add_argument("db")
    r = sub.add_parser("run")
    r.add_argument("--data", default=DATA_DIR)
    a = ap.parse_args(argv)
    if a.command == "init":
        init_db(a.seed, a.db)
        return 0
    if a.command == "run":
        return run(a.data)
    ap.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
