"""The viewer's web app: GET pages rendered on the server from the run directories it was given.

Read-only by construction: every route is a GET (anything else is 405), stores are opened read-only, and a
request names a run by its number and a store by its label among those discovered — never by a path.
Everything a run holds is untrusted (the policy wrote it): templates autoescape, and every page carries a
Content-Security-Policy with no script source at all, so even markup that slipped through could not run.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, Response
from jinja2 import Environment, PackageLoader, StrictUndefined
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.staticfiles import StaticFiles

from openforge.view import pages
from openforge.view.library import Library, UnknownRun
from openforge.view.params import BadParameter

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


def templates() -> Environment:
    env = Environment(loader=PackageLoader("openforge.view", "templates"), autoescape=True,
                      undefined=StrictUndefined, trim_blocks=True, lstrip_blocks=True)
    pages.install_filters(env)
    return env


class _SecurityHeaders(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        response = await call_next(request)
        for name, value in SECURITY_HEADERS.items():
            response.headers.setdefault(name, value)
        return response


def create_app(library: Library) -> FastAPI:
    env = templates()
    app = FastAPI(docs_url=None, redoc_url=None, openapi_url=None)
    app.add_middleware(_SecurityHeaders)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")

    def page(name: str, status: int = 200, **context) -> HTMLResponse:
        return HTMLResponse(env.get_template(name).render(**context), status_code=status)

    def routed(build, template: str):
        def handler(request: Request) -> HTMLResponse:
            try:
                context = build(library, request.query_params)
            except UnknownRun as e:
                return page("error.html", 404, title="Not found", message=str(e))
            except (BadParameter, ValueError) as e:
                return page("error.html", 400, title="Bad request", message=str(e))
            return page(template, **context)
        return handler

    for path, build, template in (
        ("/", pages.index_page, "index.html"),
        ("/run", pages.run_page, "run.html"),
        ("/episodes", pages.episodes_page, "episodes.html"),
        ("/episode", pages.episode_page, "episode.html"),
        ("/groups", pages.groups_page, "groups.html"),
        ("/group", pages.group_page, "group.html"),
        ("/compare", pages.compare_page, "compare.html"),
    ):
        app.add_api_route(path, routed(build, template), methods=["GET"], response_class=HTMLResponse)

    @app.get("/favicon.ico")
    def favicon() -> Response:
        return Response((STATIC / "favicon.svg").read_bytes(), media_type="image/svg+xml")

    @app.exception_handler(404)
    async def not_found(request: Request, exc) -> HTMLResponse:
        return page("error.html", 404, title="Not found", message=f"no page at {request.url.path}")

    return app
