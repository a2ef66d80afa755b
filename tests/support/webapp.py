"""A tiny web app on loopback for the computer-use harness's tests: a form (a text field, a drop-down, a
checkbox, a button) that saves an order, a page listing the orders in a table, a link to another origin and a
script-driven counter. Its state is the list `orders`, read by the tests (as a verifier reads an app's
database). No tests here."""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs

FORM = """<!doctype html><html><head><title>New order</title></head><body>
<nav><a href="/orders">Orders</a> <a href="http://203.0.113.9/elsewhere">Elsewhere</a></nav>
<main><h1>New order</h1>
<form method="post" action="/save">
  <label for="customer">Customer</label> <input id="customer" name="customer" value="nobody">
  <label for="plan">Plan</label>
  <select id="plan" name="plan"><option>Basic</option><option>Pro</option><option>Team</option></select>
  <label><input type="checkbox" name="gift"> Gift</label>
  <button type="submit">Save</button>
</form>
<p>Clicked <span id="n">0</span> times</p>
<button type="button" onclick="var n = document.getElementById('n'); n.textContent = +n.textContent + 1">Count</button>
<button type="button" onclick="alert('hello')">Greet</button>
</main></body></html>"""


@dataclass
class WebApp:
    url: str
    orders: list[dict[str, str]] = field(default_factory=list)


def _orders_page(app: WebApp) -> str:
    rows = "".join(
        f"<tr><td>{html.escape(o['customer'])}</td><td>{html.escape(o['plan'])}</td><td>{o['gift']}</td></tr>"
        for o in app.orders
    )
    return (
        "<!doctype html><html><head><title>Orders</title></head><body><h1>Orders</h1>"
        f"<table><tr><th>Customer</th><th>Plan</th><th>Gift</th></tr>{rows}</table>"
        f'<p>{len(app.orders)} orders</p><a href="/">New order</a></body></html>'
    )


@contextmanager
def serve_webapp() -> Iterator[WebApp]:
    app = WebApp(url="")

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:  # quiet
            pass

        def _send(self, status: int, body: str = "", location: str | None = None) -> None:
            data = body.encode()
            self.send_response(status)
            self.send_header("content-type", "text/html; charset=utf-8")
            self.send_header("content-length", str(len(data)))
            if location:
                self.send_header("location", location)
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self) -> None:  # noqa: N802 - http.server's name
            if self.path == "/":
                self._send(200, FORM)
            elif self.path == "/orders":
                self._send(200, _orders_page(app))
            elif self.path == "/broken":
                self._send(500, "broken")
            else:
                self._send(404, "<title>Not found</title>not found")

        def do_POST(self) -> None:  # noqa: N802
            length = int(self.headers.get("content-length") or 0)
            form = parse_qs(self.rfile.read(length).decode())
            app.orders.append(
                {
                    "customer": form.get("customer", [""])[0],
                    "plan": form.get("plan", [""])[0],
                    "gift": "yes" if form.get("gift") else "no",
                }
            )
            self._send(303, location="/orders")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    app.url = f"http://127.0.0.1:{server.server_address[1]}/"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield app
    finally:
        server.shutdown()
        server.server_close()
