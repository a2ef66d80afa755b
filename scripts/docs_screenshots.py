"""Screenshots for the documentation, taken in headless Chromium: the viewer's page of a quickstart run and the
quickstart's report (its figure report.png, then report.md rendered). Run after a quickstart:

    python scripts/docs_screenshots.py runs/quickstart        # writes docs/images/quickstart-*.png

Needs Debian's `chromium`; all traffic stays on 127.0.0.1.
"""

from __future__ import annotations

import argparse
import html
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
IMAGES = ROOT / "docs" / "images"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def shoot(url: str, out: Path, width: int = 1360, height: int = 1500) -> None:
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run(
            [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}",
             "--hide-scrollbars", f"--window-size={width},{height}", f"--screenshot={out}", url],
            check=True, capture_output=True, timeout=120,
        )  # fmt: skip
    print(f"wrote {out.relative_to(ROOT)}")


def report_page(run: Path) -> Path:
    """report.md as a plain HTML page beside report.png (what a reader of the run directory sees)."""
    import markdown

    body = markdown.markdown((run / "report.md").read_text(), extensions=["tables"])
    page = run / ".report-screenshot.html"
    style = (
        "body{font-family:sans-serif;max-width:1200px;margin:24px auto;color:#222}"
        "table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:4px 8px}img{max-width:100%}"
    )
    image = '<p><img src="report.png"></p>' if (run / "report.png").is_file() else ""
    title = html.escape(run.name)
    # the figure first: the per-step table below it is long
    page.write_text(f"<html><head><title>{title}</title><style>{style}</style></head><body>{image}{body}</body></html>")
    return page


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path, help="a quickstart (or train) run directory")
    args = ap.parse_args()
    run = args.run.resolve()
    IMAGES.mkdir(parents=True, exist_ok=True)
    page = report_page(run)
    try:
        shoot(page.as_uri(), IMAGES / "quickstart-report.png", height=1700)
    finally:
        page.unlink(missing_ok=True)
    port = free_port()
    viewer = subprocess.Popen(
        [sys.executable, "-m", "openforge.cli", "view", str(run), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}/run?run=0"
        for _ in range(120):
            try:
                if httpx.get(url, timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        shoot(url, IMAGES / "quickstart-viewer.png")
    finally:
        viewer.terminate()
        viewer.wait(timeout=30)
    return 0


if __name__ == "__main__":
    sys.exit(main())
