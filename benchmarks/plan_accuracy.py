"""How far ``kefu plan``'s roofline estimate is from a real ``kefu bench`` run, on this CPU.

Starts ``kefu serve`` (the embedded engine, the bundled SmolLM2-135M unless --model)
as the plan models it, the engine alone: no fast path (every message goes to the model)
and decode threads at normal priority (``--engine-nice 0``: at kefu's default 19 a busy
machine's other work starves them, which is no property of the model or the CPU). Then
a short ``kefu bench`` sweep of unique questions, then ``kefu plan --calibrate`` on the
run's summary.json: for each level, the measured mean TTFT and TPOT of the LLM answers
next to the raw estimate for this CPU (bandwidth and matmul measured a moment earlier)
and their ratio, then the fitted scales. Figures are printed, never judged.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from harness import kefu_server

WARM_UP = "Could you describe, in a few sentences, how your company was founded?"


def _kefu(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kefu", *args], capture_output=True, text=True, check=False
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="a GGUF file for kefu serve and kefu plan")
    parser.add_argument("--sweep", default="1,2,4", help="bench user levels (default: 1,2,4)")
    parser.add_argument("--requests", type=int, default=16, help="per level (default: 16)")
    parser.add_argument("--duration", type=float, default=60, help="s per level (default: 60)")
    parser.add_argument("--threads", type=int, help="kefu serve --threads")
    parser.add_argument(
        "--out", type=Path, help="keep the bench's files here (for kefu plan --calibrate)"
    )
    args = parser.parse_args()

    serve_flags = ["--no-fast-path", "--engine-nice", "0"]
    serve_flags += ["--model", args.model] if args.model else []
    serve_flags += ["--threads", str(args.threads)] if args.threads else []
    # Other work on the machine slows the server but not the estimate: say how busy it was.
    load_before = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="kefu-plan-") as tmp:
        out = args.out or Path(tmp) / "bench"
        with kefu_server(*serve_flags) as url:
            # One answer first: the model's first turn pays for warm-up the plan does not model.
            httpx.post(url + "/chat", json={"message": WARM_UP}, timeout=300).raise_for_status()
            bench = _kefu(
                "bench", "--url", url, "--sweep", args.sweep, "--requests", str(args.requests),
                "--duration", str(args.duration), "--repeat-share", "0", "--order-share", "0",
                "--think", "0.5", "--out", str(out), "--no-progress",
                "--label", "kefu serve, embedded engine, this CPU",
            )  # fmt: skip
        if bench.returncode != 0:
            sys.exit(f"kefu bench failed ({bench.returncode}):\n{bench.stderr[-2000:]}")
        plan_flags = ["--concurrent-chats", "1", "--calibrate", str(out / "summary.json")]
        plan_flags += ["--model", args.model] if args.model else []
        plan = _kefu("plan", *plan_flags, "--json")
        if plan.returncode not in (0, 1):
            sys.exit(f"kefu plan failed ({plan.returncode}): {plan.stderr.strip()}")
        report = json.loads(plan.stdout)

    load_after = os.getloadavg()[0]
    cpu, calibration = report["cpu"], report["calibration"]
    print(f"model: {report['model']['name']} ({report['model']['precision']})")
    print(
        f"machine load (1-min average) {load_before:.1f} before, {load_after:.1f} after, on "
        f"{os.cpu_count()} CPUs"
    )
    print(
        f"this CPU: {cpu['bandwidth_gbs']:.1f} GB/s copy, {cpu['tflops'] * 1000:.0f} GFLOP/s "
        f"float32 matmul ({cpu['figures']}); efficiencies {report['efficiency']['bandwidth']} "
        f"of bandwidth, {report['efficiency']['compute']} of compute"
    )
    header = (
        f"{'users':>5} {'LLM/s':>6} {'in/out':>8} {'TTFT meas':>10} {'est':>8} {'ratio':>6} "
        f"{'TPOT meas':>10} {'est':>8} {'ratio':>6}"
    )
    print(header)
    for level in calibration["levels"]:
        ttft_m, ttft_e = level["ttft_measured_s"], level["ttft_estimated_s"]
        tpot_m, tpot_e = level["tpot_measured_s"], level["tpot_estimated_s"]
        shape = f"{level['tokens_in']:.0f}/{level['tokens_out']:.0f}"
        row = f"{level['load']:>5g} {level['rate']:>6.2f} {shape:>8} {ttft_m * 1000:>8.0f}ms "
        if ttft_e is None:
            row += f"{'overload':>8} {'-':>6} {tpot_m * 1000:>8.1f}ms {'overload':>8} {'-':>6}"
        else:
            row += (
                f"{ttft_e * 1000:>6.0f}ms {ttft_m / ttft_e:>5.2f}x {tpot_m * 1000:>8.1f}ms "
                f"{tpot_e * 1000:>6.1f}ms {tpot_m / tpot_e:>5.2f}x"
            )
        print(row)
    print(
        f"fitted scales (measured / estimated time): decode x{calibration['decode_scale']:.2f}, "
        f"prefill x{calibration['prefill_scale']:.2f}"
    )


if __name__ == "__main__":
    main()
