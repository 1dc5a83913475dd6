"""The pages people use: the chat page at ``/`` (also the widget's iframe), ``/widget.js``
for a shop's own site, and the agent console at ``/agent``. Static files of the package,
no CDN, no build step.

With auth on, each page load carries a short-lived token of its own (a visitor
identity with the chat scope only), so the page works without a key in the
HTML and one visitor cannot read another's sessions. The console holds no key: the
agent types one with the admin scope.
"""

from __future__ import annotations

import html
import json
from importlib.resources import files
from typing import Any

from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from kefu.auth.tokens import issue_web_token
from kefu.fastpath.smalltalk import shop_names as names_of
from kefu.service.runtime import Runtime
from kefu.service.suggestions import suggestions
from kefu.settings import Settings

TOKEN_SLOT = '<meta name="kefu-token" content="">'
CONFIG_SLOT = '<script id="kefu-config" type="application/json">{}</script>'
TITLE_SLOT = "<title>Chat</title>"


def _static(name: str) -> str:
    return files("kefu.web").joinpath(name).read_text(encoding="utf-8")


UNNAMED = "kefu"  # a shop that gave no --shop-name


def shop_names(settings: Settings) -> dict[str, str]:
    english, chinese = names_of(settings.shop_name)
    return {"en": english, "zh": chinese}


async def page_config(runtime: Runtime | None, settings: Settings) -> dict[str, Any]:
    return {"shop": shop_names(settings), "suggestions": await suggestions(runtime)}


def _frame_ancestors(settings: Settings) -> str:
    """Who may show the chat page in a frame: this server, and the shops' sites."""
    if "*" in settings.allowed_origins:
        return "frame-ancestors *"
    return " ".join(["frame-ancestors 'self'", *settings.allowed_origins])


async def chat_page(request: Request) -> HTMLResponse:
    runtime: Runtime | None = getattr(request.app.state, "runtime", None)
    settings = runtime.settings if runtime is not None else Settings.model_validate({})
    page = _static("chat.html")
    if runtime is not None and runtime.access is not None:
        token = issue_web_token(await runtime.access.authenticator.web_secret())
        page = page.replace(TOKEN_SLOT, f'<meta name="kefu-token" content="{token}">')
    # "</" cannot end the script element early: JSON allows it escaped.
    config = json.dumps(await page_config(runtime, settings), ensure_ascii=False)
    config = config.replace("</", "<\\/")
    page = page.replace(CONFIG_SLOT, CONFIG_SLOT.replace("{}", config))
    # The script names it in the browser's language; this is for the tab before it runs.
    title = shop_names(settings)["en"] or UNNAMED  # as the script names it
    page = page.replace(TITLE_SLOT, f"<title>{html.escape(title)}</title>")
    headers = {
        # A token is per visitor: no shared cache may keep the page.
        "cache-control": "no-store",
        "content-security-policy": _frame_ancestors(settings),
    }
    return HTMLResponse(page, headers=headers)


async def widget_script(request: Request) -> Response:
    return Response(
        _static("widget.js"),
        media_type="text/javascript",
        headers={"cache-control": "public, max-age=300"},
    )


async def widget_config(request: Request) -> JSONResponse:
    """What the widget's launcher shows before its chat is opened (read across origins)."""
    runtime: Runtime = request.app.state.runtime
    return JSONResponse({"shop": shop_names(runtime.settings)})


async def agent_console(request: Request) -> HTMLResponse:
    return HTMLResponse(
        _static("agent.html"),
        headers={"cache-control": "no-store", "content-security-policy": "frame-ancestors 'none'"},
    )


routes = [
    Route("/", chat_page, methods=["GET"]),
    Route("/widget.js", widget_script, methods=["GET"]),
    Route("/widget/config", widget_config, methods=["GET"]),
    Route("/agent", agent_console, methods=["GET"]),
]
