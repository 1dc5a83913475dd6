"""The ``kefu`` command. Flags of ``kefu serve`` are generated from the Settings fields."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pydantic.fields import FieldInfo

from kefu import __version__
from kefu.bench.command import register as register_bench
from kefu.commands.cache import register as register_cache
from kefu.commands.kb import register as register_kb
from kefu.commands.keys import register as register_keys
from kefu.observe.command import register as register_diagnose
from kefu.plan.command import register as register_plan
from kefu.settings import (
    GROUPS,
    Settings,
    SettingsError,
    env_name,
    is_list_field,
    load_settings,
)
from kefu.settings.reference import default_text, flag, is_switch

# A default longer than this is cut in --help (docs/configuration.md shows it whole).
HELP_DEFAULT_CHARS = 40


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    for group in GROUPS:  # one --help section per area
        section = parser.add_argument_group(group.heading, group.__doc__)
        for name, field in group.model_fields.items():
            _add_setting_flag(section, name, field)


def _add_setting_flag(section: argparse._ArgumentGroup, name: str, field: FieldInfo) -> None:
    help_text = f"{field.description} [env {env_name(name)}; default: {_default(field)}]"
    if is_switch(field):
        section.add_argument(
            flag(name), dest=name, action=argparse.BooleanOptionalAction, help=help_text
        )
    elif is_list_field(name):
        section.add_argument(
            flag(name), dest=name, action="append", metavar=name.upper(), help=help_text
        )
    else:
        section.add_argument(flag(name), dest=name, metavar=name.upper(), help=help_text)


def _default(field: FieldInfo) -> str:
    text = default_text(field)
    return text if len(text) <= HELP_DEFAULT_CHARS else text[: HELP_DEFAULT_CHARS - 3] + "..."


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kefu",
        description="kefu (客服): a latency-first LLM customer-service server.",
    )
    parser.add_argument("--version", action="version", version=f"kefu {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    serve = commands.add_parser(
        "serve",
        help="run the chat server (OpenAI-compatible /v1 API, /chat SSE API, web page at /)",
        description="Run the chat server. Settings come from (lowest first) defaults, the TOML "
        "file given by --config, KEFU_* environment variables, then these flags.",
    )
    serve.add_argument(
        "--config",
        type=Path,
        metavar="FILE",
        help="TOML file of settings, keys named like the flags [env KEFU_CONFIG]",
    )
    _add_setting_flags(serve)
    serve.set_defaults(run=_serve_command)
    register_diagnose(commands)
    register_bench(commands)
    register_kb(commands)
    register_cache(commands)
    register_plan(commands)
    register_keys(commands)
    return parser


def _settings(args: argparse.Namespace) -> Settings:
    flags: dict[str, Any] = {name: getattr(args, name) for name in Settings.model_fields}
    return load_settings(flags, config_file=args.config)


def _serve_command(args: argparse.Namespace) -> int:
    try:
        settings = _settings(args)
    except SettingsError as exc:
        print(f"kefu: error: {exc}", file=sys.stderr)
        return 2
    serve(settings)
    return 0


def serve(settings: Settings) -> None:
    import uvicorn

    from kefu.app import create_app
    from kefu.heap import cap_arenas

    cap_arenas()  # before the server's threads start: each would take an arena of its own

    logging.basicConfig(
        level=settings.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    # The access log is one JSON object per line, ready for any log shipper.
    access = logging.getLogger("kefu.access")
    access_handler = logging.StreamHandler()
    access_handler.setFormatter(logging.Formatter("%(message)s"))
    access.addHandler(access_handler)
    access.propagate = False
    # httpx logs every request at INFO: with remote engines, a health check a second each.
    logging.getLogger("httpx").setLevel(logging.WARNING)
    app = create_app(settings)
    config = uvicorn.Config(
        app,
        host=settings.host,
        port=settings.port,
        log_level=settings.log_level,
        access_log=False,  # one line per request comes from kefu itself, not uvicorn
        timeout_graceful_shutdown=5,
    )
    uvicorn.Server(config).run()


def main(argv: Sequence[str] | None = None) -> int:
    """Each subcommand sets ``run``: a function of the parsed args returning the exit status."""
    args = build_parser().parse_args(argv)
    status: int = args.run(args)
    return status


if __name__ == "__main__":
    sys.exit(main())
