"""Bad input by hand against ``kefu serve``: the table of input, status, time, stored.

The probes are tests/e2e/bad_input.py's (raw sockets: broken UTF-8, 10 MB bodies, a
slow-loris body, two requests in one write, ...). Each row: the status(es) the server
answered, the envelope's code, the seconds until the connection closed, and whether
the store changed. Fake engine by default (the HTTP layer is under test); ``--real-model``
serves the bundled model. ``--python`` runs another checkout's kefu (e.g. main's venv,
for the table before a fix); it gets ``--body-timeout`` only if it has the flag.

    .venv/bin/python benchmarks/bad_input.py [--real-model] [--body-timeout 2]
        [--python /work/main/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ beside benchmarks/

from tests.e2e.bad_input import envelope_code, exchange, probes, stored_counts

from harness import free_port, running, summary


def main() -> int:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--real-model", action="store_true", help="the bundled model, not fake")
    parser.add_argument("--body-timeout", type=float, default=2.0)
    parser.add_argument("--python", default=sys.executable, help="the interpreter running kefu")
    args = parser.parse_args()

    port = free_port()
    with tempfile.TemporaryDirectory(prefix="kefu-bad-input-") as tmp:
        data_dir = Path(tmp)
        command = [args.python, "-m", "kefu", "serve", "--port", str(port)]
        command += ["--data-dir", str(data_dir), "--log-level", "warning", "--threads", "2"]
        if not args.real_model:
            command += ["--engine", "fake"]
        help_text = subprocess.run(
            [args.python, "-m", "kefu", "serve", "--help"], capture_output=True, text=True
        ).stdout
        if "--body-timeout" in help_text:
            command += ["--body-timeout", str(args.body_timeout)]
        with running(command, f"http://127.0.0.1:{port}/ready", "kefu"):
            rows = []
            failures = 0
            for probe in probes(args.body_timeout):
                before = stored_counts(data_dir)
                answer = exchange("127.0.0.1", port, probe)
                after = stored_counts(data_dir)
                try:
                    code = envelope_code(answer.body) if answer.statuses[-1:] >= [400] else "-"
                except (ValueError, KeyError, AssertionError, TypeError):
                    code = "NOT AN ENVELOPE"
                ok = answer.statuses == list(probe.expect) and code != "NOT AN ENVELOPE"
                failures += not ok
                status = ",".join(map(str, answer.statuses)) or "none"
                stored = "unchanged" if after == before else f"{before} -> {after}"
                rows.append((probe.name, status, str(code), f"{answer.seconds:.3f}", stored, ok))
    print(f"kefu serve ({'real model' if args.real_model else 'fake engine'}), {args.python}")
    print(f"{'input':40} {'status':8} {'code':22} {'seconds':>8}  {'store':10} expected")
    for name, status, code, seconds, stored, ok in rows:
        mark = "yes" if ok else "NO"
        print(f"{name:40} {status:8} {code:22} {seconds:>8}  {stored:10} {mark}")
    print(f"{len(rows)} probes, {failures} not as expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
