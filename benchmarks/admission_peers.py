"""kefu's defaults against llama.cpp's own server and real load tools, from a fresh start
(issue 36's table, again): does a fresh kefu refuse what the box can serve?

Three parts, each server fresh for each row (bundled model, 2 threads, 8 slots):

- ``/v1`` streams: N concurrent clients, ``--requests`` in all, ``--max-tokens`` 64
  each, against llama.cpp's ``llama-server`` (built from the llama.cpp that
  llama-cpp-python vendors: ``--llama-server PATH``) and ``kefu serve`` with its defaults;
  sent / answered / refused, TTFT p50/p99, output tokens/s (each reply re-tokenised with
  the model's tokenizer, the same way for both), and kefu / llama-server.
- NVIDIA's ``aiperf`` (``--aiperf PATH``, installed apart: ``pip install aiperf``) at each
  ``--aiperf-levels`` concurrency, 150-token prompts, 64 output tokens, against both, its
  tokenizer a ``tokenizer.json`` written from the GGUF's own vocabulary and merges (its
  default tokenizer downloads).
- The seeds' own command, ``wrk -t4 -c100 -d30s --latency`` against ``/chat`` (Debian's
  ``wrk``; a Lua script posts shop questions, some repeated and some unique), for kefu
  under each admission policy: requests, the share refused, wrk's latency percentiles
  (refusals included) and, from the server's /stats, the answered requests' E2E p99.

    .venv/bin/python benchmarks/admission_peers.py --llama-server PATH [--aiperf PATH]
        [--streams 1,8,16] [--repeat N] [--aiperf-levels 8,32] [--no-wrk]

llama-server from the vendored sources:
    pip download llama-cpp-python==0.3.36 --no-deps --no-binary :all: && tar xzf ...
    cmake -S vendor/llama.cpp -B build -DLLAMA_CURL=OFF && cmake --build build -t llama-server
It runs with ``--no-repack`` (DESIGN.md: the AMX kernels crash in this VM).
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import random
import re
import statistics
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

from admission import one_stream, question_body
from harness import free_port, kefu_process, percentile, running, summary
from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.model import LlamaModel

QUESTIONS = [
    "Where is my parcel? I ordered it last Monday, order {n}.",
    "How do I return a pair of shoes that do not fit?",
    "Can I change the delivery address of my order {n}?",
    "How long does a refund take?",
    "Do you ship to Canada, and how much does it cost?",
    "I received a damaged item in order {n}. What should I do?",
    "How do I get an invoice for order {n}?",
    "Can I pay with a gift card?",
]
WRK_SCRIPT = r"""
-- Shop questions: half the popular ones (repeated), half unique (a number in them).
local popular = {%s}
local unique = {%s}
counter = 0
request = function()
  counter = counter + 1
  local text
  if math.random() < 0.5 then
    text = popular[math.random(#popular)]
  else
    text = string.format(unique[math.random(#unique)], math.random(10000, 99999))
  end
  local body = '{"message": "' .. text .. '"}'
  return wrk.format("POST", "/chat", {["Content-Type"] = "application/json"}, body)
end
threads = {}
setup = function(thread) table.insert(threads, thread) end
statuses = {}
response = function(status, headers, body)
  statuses[status] = (statuses[status] or 0) + 1
end
-- Each thread counts in its own Lua state; done() sums what they counted.
done = function(summary, latency, requests)
  local totals = {}
  for _, thread in ipairs(threads) do
    for s, n in pairs(thread:get("statuses")) do totals[s] = (totals[s] or 0) + n end
  end
  local parts = {}
  for s, n in pairs(totals) do parts[#parts + 1] = string.format('"%%d": %%d', s, n) end
  io.write("STATUSES {" .. table.concat(parts, ", ") .. "}\n")
end
"""


def tokenizer_dir(model: Path, out: Path) -> Path:
    """A Hugging Face ``tokenizer.json`` (byte-level BPE) from the GGUF's vocabulary and
    merges, with a ``tokenizer_config.json``: what aiperf loads, offline."""
    from gguf import GGUFReader

    reader = GGUFReader(model)

    def strings(key: str) -> list[str]:
        field = reader.fields[key]
        return [bytes(field.parts[i]).decode("utf-8") for i in field.data]

    def number(key: str) -> int:
        field = reader.fields[key]
        return int(field.parts[field.data[0]][0])

    tokens = strings("tokenizer.ggml.tokens")
    types = reader.fields["tokenizer.ggml.token_type"]
    kinds = [int(types.parts[i][0]) for i in types.data]
    control = [i for i, kind in enumerate(kinds) if kind == 3]  # llama.cpp: 3 = control
    bos, eos = number("tokenizer.ggml.bos_token_id"), number("tokenizer.ggml.eos_token_id")
    byte_level = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True}
    document = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": i,
                "content": tokens[i],
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for i in control
        ],
        "normalizer": None,
        "pre_tokenizer": byte_level | {"use_regex": True},
        "post_processor": None,
        "decoder": byte_level | {"use_regex": True},
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": None,
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": False,
            "byte_fallback": False,
            "vocab": {token: i for i, token in enumerate(tokens)},
            "merges": strings("tokenizer.ggml.merges"),
        },
    }
    out.mkdir(parents=True, exist_ok=True)
    (out / "tokenizer.json").write_text(json.dumps(document, ensure_ascii=False))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": tokens[bos],
        "eos_token": tokens[eos],
        "model_max_length": 8192,
    }
    (out / "tokenizer_config.json").write_text(json.dumps(config))
    return out


@dataclass
class StreamsRow:
    server: str
    streams: int
    sent: int
    answered: int
    refused: int
    other: int
    ttft: list[float]
    tokens: int
    wall: float


async def streams(url: str, clients: int, total: int, model: LlamaModel) -> StreamsRow:
    """``clients`` streams sending ``total`` requests between them, back to back."""
    rng = random.Random(clients)
    ttft: list[float] = []
    texts: list[str] = []
    refused = other = 0
    queue = list(range(total))

    async def client_loop(client: httpx.AsyncClient) -> None:
        nonlocal refused, other
        while queue:
            queue.pop()
            request = await one_stream(client, url, question_body(rng))
            if request.status in (429, 503):
                refused += 1
            elif request.code is not None or request.first is None:
                other += 1
            else:
                ttft.append(request.first - request.sent)
                texts.append(request.text)

    limits = httpx.Limits(max_connections=clients + 4)
    async with httpx.AsyncClient(timeout=300, limits=limits) as client:
        started = time.perf_counter()
        await asyncio.gather(*(client_loop(client) for _ in range(clients)))
        wall = time.perf_counter() - started
    tokens = sum(len(model.tokenize(text)) for text in texts)
    return StreamsRow("", clients, total, len(ttft), refused, other, ttft, tokens, wall)


def llama_server(binary: Path, model: Path, *, parallel: int = 8, threads: int = 2) -> Any:
    port = free_port()
    command = [str(binary), "-m", str(model), "--port", str(port), "--no-repack"]
    command += ["-t", str(threads), "-tb", str(threads), "--parallel", str(parallel)]
    command += ["-c", str(parallel * 2048), "--no-webui", "--log-disable"]
    return running(command, f"http://127.0.0.1:{port}/health", "llama-server"), port


def print_streams(rows: list[StreamsRow]) -> None:
    print(
        f"{'server':14} {'streams':>7} {'sent':>5} {'answd':>5} {'refused':>7} {'other':>5} "
        f"{'ttft50':>6} {'ttft99':>6} {'tok/s':>7}"
    )
    for row in rows:
        print(
            f"{row.server:14} {row.streams:7} {row.sent:5} {row.answered:5} {row.refused:7} "
            f"{row.other:5} {percentile(row.ttft, 50) * 1000:6.0f} "
            f"{percentile(row.ttft, 99) * 1000:6.0f} {row.tokens / row.wall:7.1f}"
        )
    print()
    kefu_names = sorted({r.server for r in rows if r.server.startswith("kefu")})
    for streams_count, kefu in itertools.product(sorted({r.streams for r in rows}), kefu_names):
        kefus = [r for r in rows if r.streams == streams_count and r.server == kefu]
        bases = [r for r in rows if r.streams == streams_count and r.server == "llama-server"]
        pairs = [(k, b) for k, b in zip(kefus, bases, strict=False) if b.tokens and b.ttft]
        if not pairs:
            continue
        speed = [(k.tokens / k.wall) / (b.tokens / b.wall) for k, b in pairs]
        ttft = [percentile(k.ttft, 99) / percentile(b.ttft, 99) for k, b in pairs if k.ttft]
        each = ""
        if len(pairs) > 1:
            each = f" (each pair: tok/s {' '.join(f'{x:.2f}' for x in speed)})"
        print(
            f"{streams_count} streams: {kefu} / llama-server tok/s "
            f"{statistics.median(speed):.2f}x, TTFT p99 {statistics.median(ttft):.2f}x{each}"
        )


def run_aiperf(aiperf: Path, url: str, concurrency: int, tokenizer: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="aiperf-") as out:
        command = [str(aiperf), "profile", "--model", "bench", "--url", url]
        command += ["--endpoint-type", "chat", "--streaming", "--tokenizer", str(tokenizer)]
        command += ["--concurrency", str(concurrency), "--request-count", str(6 * concurrency)]
        command += ["--synthetic-input-tokens-mean", "150", "--output-tokens-mean", "64"]
        command += ["--artifact-dir", out, "--ui-type", "none"]
        result = subprocess.run(command, capture_output=True, text=True, check=False)
        found = list(Path(out).rglob("*aiperf.json"))
        if not found:
            tail = (result.stdout + result.stderr)[-2000:]
            raise RuntimeError(f"aiperf wrote no results (exit {result.returncode}):\n{tail}")
        report: dict[str, Any] = json.loads(found[0].read_text())
    return report


def aiperf_line(server: str, concurrency: int, report: dict[str, Any]) -> str:
    def metric(name: str, stat: str) -> float:
        value = report.get(name, {}).get(stat)
        return float("nan") if value is None else float(value)

    requests = metric("request_count", "avg")
    errors = sum(int(e.get("count", 0)) for e in report.get("error_summary", []) or [])
    return (
        f"{server:14} {concurrency:5} {requests + errors:6.0f} {requests:6.0f} {errors:6} "
        f"{metric('time_to_first_token', 'p50'):7.0f} {metric('time_to_first_token', 'p99'):7.0f} "
        f"{metric('output_token_throughput', 'avg'):8.1f}"
    )


def run_wrk(url: str) -> tuple[str, dict[int, int]]:
    popular = ", ".join(json.dumps(q) for q in QUESTIONS if "{n}" not in q)
    unique = ", ".join(json.dumps(q.replace("{n}", "%d")) for q in QUESTIONS if "{n}" in q)
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as script:
        script.write(WRK_SCRIPT % (popular, unique))
    command = ["wrk", "-t4", "-c100", "-d30s", "--latency", "--timeout", "60s", "-s", script.name]
    result = subprocess.run([*command, url + "/chat"], capture_output=True, text=True, check=True)
    Path(script.name).unlink()
    found = re.search(r"STATUSES (\{.*\})", result.stdout)
    statuses = {int(k): v for k, v in json.loads(found.group(1)).items()} if found else {}
    return result.stdout, statuses


def wrk_part() -> None:
    print("\nwrk -t4 -c100 -d30s --latency against /chat, fresh kefu serve per policy\n")
    for policy in ("queue", "predicted"):
        with kefu_process("--admission", policy, ready_timeout=600) as (url, _):
            output, statuses = run_wrk(url)
            stats = httpx.get(url + "/stats", params={"window": 60}, timeout=10).json()
        total = sum(statuses.values())
        refused = sum(n for s, n in statuses.items() if s in (429, 503))
        latency = re.search(r"Latency Distribution\n((?:.*\n){4})", output)
        print(f"--admission {policy}: {total} responses, statuses {dict(sorted(statuses.items()))}")
        print(f"  refused {refused / max(total, 1):.1%}")
        print(
            "  wrk latency (all responses):",
            " ".join((latency.group(1) if latency else "").split()),
        )
        print(
            f"  answered, server-side: E2E p50 {stats['e2e_ms']['p50']} ms, p99 "
            f"{stats['e2e_ms']['p99']} ms; TTFT p99 {stats['ttft_ms']['p99']} ms; "
            f"tiers {stats['tiers']}; errors {stats['errors_by_code']}"
        )
        summary = re.search(r"Requests/sec:\s+(\S+)", output)
        print(f"  requests/s {summary.group(1) if summary else '-'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--llama-server", type=Path, help="llama.cpp's llama-server binary")
    parser.add_argument("--aiperf", type=Path, help="NVIDIA's aiperf command")
    parser.add_argument("--streams", default="1,8,16", help="concurrent /v1 streams")
    parser.add_argument("--requests", type=int, default=32, help="requests per streams row")
    parser.add_argument("--aiperf-levels", default="8,32", help="aiperf concurrencies")
    parser.add_argument("--no-wrk", action="store_true", help="skip the wrk part")
    parser.add_argument(
        "--repeat",
        type=int,
        default=1,
        help="streams rows per server, alternating which goes first (this box's tok/s "
        "moves by a third between runs: the median of the pairs' ratios is printed)",
    )
    parser.add_argument(
        "--queue-too",
        action="store_true",
        help="a streams row of kefu with --admission queue too: the engine's speed where "
        "the default policy refuses what would miss the SLO",
    )
    args = parser.parse_args()
    model_path = bundled_model_path()
    model = LlamaModel(model_path)
    servers: list[tuple[str, Any]] = [("kefu defaults", None)]
    if args.queue_too:
        servers.append(("kefu queue", None))
    if args.llama_server:
        servers.insert(0, ("llama-server", args.llama_server))

    rows: list[StreamsRow] = []
    print("/v1 streams, 64 tokens, a fresh server per row\n")
    for count, turn in itertools.product(
        [int(x) for x in args.streams.split(",")], range(args.repeat)
    ):
        for name, binary in servers if turn % 2 == 0 else servers[::-1]:
            total = max(args.requests, 2 * count)
            if binary is None:
                flags = ("--admission", "queue") if name == "kefu queue" else ()
                with kefu_process(*flags, ready_timeout=600) as (url, _):
                    row = asyncio.run(streams(url, count, total, model))
            else:
                server, port = llama_server(binary, model_path)
                with server:
                    row = asyncio.run(streams(f"http://127.0.0.1:{port}", count, total, model))
            row.server = name
            rows.append(row)
    print_streams(rows)

    if args.aiperf:
        tokenizer = tokenizer_dir(model_path, Path(tempfile.mkdtemp(prefix="kefu-tokenizer-")))
        print(
            f"\naiperf, 150-token prompts, 64 output tokens, 6 x concurrency requests, a fresh "
            f"server per row (tokenizer from the GGUF: {tokenizer})\n"
        )
        print(
            f"{'server':14} {'conc':>5} {'sent':>6} {'answd':>6} {'errors':>6} "
            f"{'ttft50':>7} {'ttft99':>7} {'tok/s':>8}"
        )
        for concurrency in [int(x) for x in args.aiperf_levels.split(",")]:
            for name, binary in servers:
                if binary is None:
                    flags = ("--admission", "queue") if name == "kefu queue" else ()
                    with kefu_process(*flags, ready_timeout=600) as (url, _):
                        report = run_aiperf(args.aiperf, url, concurrency, tokenizer)
                else:
                    server, port = llama_server(binary, model_path)
                    with server:
                        url = f"http://127.0.0.1:{port}"
                        report = run_aiperf(args.aiperf, url, concurrency, tokenizer)
                print(aiperf_line(name, concurrency, report), flush=True)
    if not args.no_wrk:
        wrk_part()


if __name__ == "__main__":
    main()
