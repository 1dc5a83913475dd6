"""The web chat page at ``/``: one static file, no CDN, no build step.

With auth on, each page load carries a short-lived token of its own (a visitor
identity with the chat scope only), so the page works without a key in the
HTML and one visitor cannot read another's sessions.
"""

from __future__ import annotations

from importlib.resources import files

from starlette.requests import Request
from starlette.responses import HTMLResponse
from starlette.routing import Route

from kefu.auth.tokens import issue_web_token
from kefu.service.runtime import Runtime

TOKEN_SLOT = '<meta name="kefu-token" content="">'


async def chat_page(request: Request) -> HTMLResponse:
    page = files("kefu.web").joinpath("chat.html").read_text(encoding="utf-8")
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    if runtime is not None and runtime.access is not None:
        token = issue_web_token(await runtime.access.authenticator.web_secret())
        page = page.replace(TOKEN_SLOT, f'<meta name="kefu-token" content="{token}">')
    # A token is per visitor: no shared cache may keep the page.
    return HTMLResponse(page, headers={"cache-control": "no-store"})


routes = [Route("/", chat_page, methods=["GET"])]
