"""The ``--data-dir`` option of the admin commands (``kefu kb``, ``kefu cache``): they
edit the files of a data dir that a running server picks up."""

from __future__ import annotations

import argparse
from pathlib import Path

from kefu.settings import load_settings


def data_dir_option() -> argparse.ArgumentParser:
    """A parent parser with ``--data-dir``, for ``add_parser(..., parents=[...])``."""
    option = argparse.ArgumentParser(add_help=False)
    option.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="folder of kefu's state (default: the data_dir setting, env KEFU_DATA_DIR)",
    )
    return option


def chosen_data_dir(args: argparse.Namespace) -> Path:
    """``--data-dir`` when given, else the settings' (environment, config file, default)."""
    if args.data_dir is not None:
        path: Path = args.data_dir
        return path
    return load_settings().data_dir
