"""The viewer's web app (Starlette): GET pages rendered on the server from the run directories it was given.

Routes: the pages (`PAGES`), `/image?run=&store=&sha256=` (an image a harness sent, from the store by its
hash, under its own media type), the static files.

Read-only by construction: every route is a GET (anything else is 405), stores are opened read-only, and a
request names a run by its number and a store by its label among those discovered — never by a path.
Everything a run holds is untrusted (the policy wrote it): templates autoescape, and every page carries a
Content-Security-Policy with no script source at all, so even markup that slipped through could not run.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import QueryParams
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from openforge.dialects.images import MEDIA_TYPES
from openforge.view import pages
from openforge.view import params as p
from openforge.view.library import Library, UnknownRun
from openforge.view.params import BadParameter

_SHA256 = re.compile(r"[0-9a-fA-F]{64}")

STATIC = Path(__file__).parent / "static"
SECURITY_HEADERS = {
    # no script-src: nothing on these pages runs script, so an injection could not either
    "content-security-policy": "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'none'",
    "x-content-type-options": "nosniff",
    "referrer-policy": "no-referrer",
    "x-frame-options": "DENY",
    "cache-control": "no-store",
}
# a page: the template's context from the library and the query string
PageBuilder = Callable[[Library, QueryParams], dict[str, Any]]
PAGES: tuple[tuple[str, PageBuilder, str], ...] = (
    ("/", pages.index_page, "index.html"),
    ("/run", pages.run_page, "run.html"),
    ("/episodes", pages.episodes_page, "episodes.html"),
    ("/episode", pages.episode_page, "episode.html"),
    ("/groups", pages.groups_page, "groups.html"),
    ("/group", pages.group_page, "group.html"),
    ("/compare", pages.compare_page, "compare.html"),
)


def templates() -> Environment:
    env = Environment(
        loader=PackageLoader("openforge.view", "templates"),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    pages.install_filters(env)
    return env


class SecurityHeaders:
    """Adds `SECURITY_HEADERS` to every response (pages, static files, errors)."""

    def __init__(self, app: ASGIApp):
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                present = {k.lower() for k, _ in message.get("headers", [])}
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + [
                    (k.encode(), v.encode()) for k, v in SECURITY_HEADERS.items() if k.encode() not in present
                ]
            await send(message)

        await self.app(scope, receive, with_headers)


def create_app(library: Library) -> Starlette:
    env = templates()

    def render(name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**context), status_code=status)

    def build(builder: PageBuilder, template: str, params: QueryParams) -> HTMLResponse:
        try:
            context = builder(library, params)
        except UnknownRun as e:
            return render("error.html", 404, title="Not found", message=str(e))
        except (BadParameter, ValueError) as e:
            return render("error.html", 400, title="Bad request", message=str(e))
        return render(template, **context)

    def page(builder: PageBuilder, template: str) -> Callable[[Request], Awaitable[HTMLResponse]]:
        async def endpoint(request: Request) -> HTMLResponse:
            # the stores and templates are synchronous: keep them off the event loop
            return await run_in_threadpool(build, builder, template, request.query_params)

        return endpoint

    def image(params: QueryParams) -> Response:
        try:
            opened = library.open(p.integer(params, "run", 0, 0), p.text(params, "store", "."))
            sha256 = p.required(params, "sha256")
        except UnknownRun as e:
            return render("error.html", 404, title="Not found", message=str(e))
        except (BadParameter, ValueError) as e:
            return render("error.html", 400, title="Bad request", message=str(e))
        found = opened.store.get_image(sha256.lower()) if _SHA256.fullmatch(sha256) else None
        # only the image types the dialects accept are served, under their own type (never e.g. SVG)
        if found is None or found[0] not in MEDIA_TYPES:
            return render("error.html", 404, title="Not found", message=f"no image {sha256!r} in this store")
        # an image's bytes never change for its hash: it may be cached, unlike the pages
        return Response(found[1], media_type=found[0], headers={"cache-control": "private, max-age=86400, immutable"})

    async def image_endpoint(request: Request) -> Response:
        return await run_in_threadpool(image, request.query_params)

    async def favicon(request: Request) -> Response:
        return Response((STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml")

    async def http_error(request: Request, exc: HTTPException) -> Response:
        message = f"no page at {request.url.path}" if exc.status_code == 404 else str(exc.detail)
        return render("error.html", exc.status_code, title=str(exc.detail), message=message)

    routes: list[BaseRoute] = [
        Route(path, page(builder, template), methods=["GET"]) for path, builder, template in PAGES
    ]
    routes += [
        Route("/image", image_endpoint, methods=["GET"]),
        Route("/favicon.ico", favicon, methods=["GET"]),
        Mount("/static", StaticFiles(directory=STATIC)),
    ]
    # starlette types every handler as taking any Exception, though it calls this one with HTTPException only
    handlers = {HTTPException: http_error}
    return Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders)],
        exception_handlers=handlers,  # type: ignore[arg-type]
    )
