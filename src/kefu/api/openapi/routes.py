"""``/openapi.json`` (generated from the app's own routes) and ``/docs``, a page that renders it."""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from kefu.api.openapi.document import build_document
from kefu.service.runtime import Runtime


async def openapi(request: Request) -> JSONResponse:
    """Every route of this server, its wire models, errors and security, as OpenAPI 3.1."""
    state = request.app.state
    document = getattr(state, "openapi", None)
    if document is None:  # built once per app (about 70 ms): routes and models are fixed
        runtime: Runtime = state.runtime
        document = state.openapi = build_document(request.app.routes, runtime.settings)
    return JSONResponse(document)


async def docs(request: Request) -> HTMLResponse:
    """A readable page of /openapi.json; one static file, no CDN."""
    return HTMLResponse(files("kefu.web").joinpath("api.html").read_text(encoding="utf-8"))


routes = [
    Route("/openapi.json", openapi, methods=["GET"]),
    Route("/docs", docs, methods=["GET"]),
]
