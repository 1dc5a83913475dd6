"""schemathesis over every operation of /openapi.json, longer than CI's run: the counts.

The app runs in process (schemathesis's ASGI transport) on the fake engine, or with
``--real-model`` on the bundled model; each operation gets ``--examples`` valid and
``--examples`` invalid requests (derandomised), checked as tests/http/fuzzing.py says:
no 5xx, status, content type, headers and body (SSE events too) as documented, invalid
input refused, every error the OpenAI envelope. Prints operations, examples run,
responses by status, seconds per operation and each distinct failure with a curl line.

    .venv/bin/python benchmarks/fuzz.py [--examples 50] [--real-model]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ beside benchmarks/

import schemathesis
from schemathesis.python import asgi
from tests.http.fuzzing import fuzz

from harness import summary
from kefu.app import build_engine, create_app
from kefu.settings import Settings


def main() -> int:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--examples", type=int, default=50, help="per operation and mode")
    parser.add_argument("--real-model", action="store_true", help="the bundled model, not fake")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory(prefix="kefu-fuzz-") as data_dir:
        values: dict[str, object] = {"data_dir": Path(data_dir), "threads": 2, "max_tokens": 16}
        if args.real_model:
            # A short window keeps the longest reply a request may ask for (max_tokens is
            # clamped to the room left) to seconds, not minutes, on 2 CPU cores.
            values["context_size"] = 512
        else:
            values["engine"] = ("fake",)
        settings = Settings.model_validate(values)
        app = create_app(settings, build_engine)
        started = time.perf_counter()
        try:
            schema = schemathesis.openapi.from_asgi("/openapi.json", app)
            with asgi.get_client(app) as client:  # type: ignore[arg-type]  # the model loads in the background
                while client.get(f"http://{asgi.HOST}/ready").status_code != 200:
                    time.sleep(0.1)
            ready = time.perf_counter() - started
            report = fuzz(schema, examples=args.examples, timeout=args.timeout)
        finally:
            asgi.shutdown_lifespans()
    took = time.perf_counter() - started - ready
    engine = "bundled model" if args.real_model else "fake engine"
    print(f"schemathesis {schemathesis.__version__}, {engine}, --examples {args.examples}")
    print(f"ready in {ready:.1f} s; fuzzing took {took:.1f} s")
    print(report.summary())
    print("passing responses by status:", dict(sorted(report.statuses.items())))
    print(f"{'operation':45} seconds")
    for label, seconds in sorted(report.seconds.items(), key=lambda kv: -kv[1]):
        print(f"{label:45} {seconds:7.2f}")
    for key, detail in report.failures.items():
        print(f"\nFAILURE {key}\n{detail}")
    return 1 if report.failures else 0


if __name__ == "__main__":
    sys.exit(main())
