"""How a data-dir command fails on what its user can fix: one line on stderr, exit 2."""

from __future__ import annotations

import argparse
import functools
import sys
from collections.abc import Callable

from kefu.errors import KefuError
from kefu.settings import SettingsError

EXIT_ERROR = 2
Run = Callable[[argparse.Namespace], int]


def guarded(command: str, *also: type[Exception]) -> Callable[[Run], Run]:
    """``kefu COMMAND: error: ...`` and exit status 2 for a ``KefuError``, a bad setting
    and the exception types in ``also``."""
    caught: tuple[type[Exception], ...] = (KefuError, SettingsError, *also)

    def wrap(fn: Run) -> Run:
        @functools.wraps(fn)
        def run(args: argparse.Namespace) -> int:
            try:
                return fn(args)
            except caught as exc:
                message = exc.message if isinstance(exc, KefuError) else str(exc)
                print(f"kefu {command}: error: {message}", file=sys.stderr)
                return EXIT_ERROR

        return run

    return wrap
