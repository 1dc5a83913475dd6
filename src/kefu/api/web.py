"""The web chat page at ``/``: one static file, no CDN, no build step."""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route


async def chat_page(request: Request) -> HTMLResponse:
    page = files("kefu.web").joinpath("chat.html").read_text(encoding="utf-8")
    return HTMLResponse(page)


routes = [Route("/", chat_page, methods=["GET"])]
