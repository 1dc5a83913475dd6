"""What grammar-constrained tool calls are worth on the bundled model: the evidence behind
the embedded engine's answer to ``tools`` (a 400 that names the engines that call tools).

llama-cpp-python's server with ``--chat_format chatml-function-calling`` constrains the
model's output with a JSON grammar built from the tool schemas, the way kefu's embedded
engine would. On the bundled SmolLM2-135M, this asks it a dozen customer messages, each
with a right tool and a right argument (an order number in the message), with the tool
named (the grammar picks nothing) and with ``tool_choice: "auto"`` (the model picks), and
counts: valid JSON arguments, the right tool, the right argument copied. The same requests
go through ``kefu serve --engine URL`` too; its counts must be the engine's (the
pass-through changes nothing).

    .venv/bin/python benchmarks/tool_calls.py [--threads 2]
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx

from harness import free_port, kefu_server, running
from kefu.engine.bundled import bundled_model_path
from kefu.engine.llamacpp.stock_server import LLAMA_SERVER_WITH_AMX_FIX


def function(name: str, description: str, **properties: str) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": {
                    k: {"type": "string", "description": v} for k, v in properties.items()
                },
                "required": list(properties),
            },
        },
    }  # fmt: skip


TOOLS = [
    function("order_status", "Where an order is and when it arrives.", order_id="the order number"),
    function("refund_status", "Whether a refund was paid, and when.", order_id="the order number"),
    function("cancel_order", "Cancel an order that has not shipped.", order_id="the order number"),
]
# (message, the right tool, the right argument)
CASES = [
    ("Where is my order LH-10023?", "order_status", "LH-10023"),
    ("Has order KF-55120 shipped yet?", "order_status", "KF-55120"),
    ("When will parcel AB-90817 arrive?", "order_status", "AB-90817"),
    ("Track LH-44310 for me please", "order_status", "LH-44310"),
    ("Did you refund my money for order KF-20388?", "refund_status", "KF-20388"),
    ("Is the refund for LH-73001 paid?", "refund_status", "LH-73001"),
    ("I returned AB-11290, where is my refund?", "refund_status", "AB-11290"),
    ("Refund status of KF-66012?", "refund_status", "KF-66012"),
    ("Please cancel order LH-30233", "cancel_order", "LH-30233"),
    ("I don't want KF-80451 any more, cancel it", "cancel_order", "KF-80451"),
    ("Cancel AB-52719 before it ships", "cancel_order", "AB-52719"),
    ("Stop order LH-90112, I ordered by mistake", "cancel_order", "LH-90112"),
]
SYSTEM = "You are a shop's assistant. Call the tool that answers the customer."


@dataclass
class Counts:
    asked: int = 0
    called: int = 0  # any tool call came back
    valid_json: int = 0
    right_tool: int = 0
    right_argument: int = 0
    errors: list[str] = field(default_factory=list)

    def row(self, name: str) -> str:
        return (
            f"| {name} | {self.asked} | {self.called} | {self.valid_json} | {self.right_tool} | "
            f"{self.right_argument} |"
        )


def ask(client: httpx.Client, url: str, named: bool) -> Counts:
    counts = Counts()
    for message, tool, argument in CASES:
        messages = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": message}]
        body: dict[str, Any] = {
            "messages": messages,
            "tools": TOOLS,
            "tool_choice": {"type": "function", "function": {"name": tool}} if named else "auto",
            "max_tokens": 48,
            "temperature": 0,
        }  # fmt: skip
        counts.asked += 1
        response = client.post(url + "/chat/completions", json=body)
        if response.status_code != 200:
            counts.errors.append(f"{response.status_code} {response.text[:80]}")
            continue
        calls = response.json()["choices"][0]["message"].get("tool_calls") or []
        if not calls:
            continue
        counts.called += 1
        call = calls[0]["function"]
        try:
            arguments = json.loads(call["arguments"])
        except ValueError:
            continue
        counts.valid_json += 1
        counts.right_tool += call["name"] == tool
        counts.right_argument += (
            isinstance(arguments, dict) and arguments.get("order_id") == argument
        )
    return counts


@contextmanager
def engine(threads: int) -> Iterator[str]:
    port = free_port()
    command = [
        sys.executable,
        "-c",
        LLAMA_SERVER_WITH_AMX_FIX,
        "--model",
        str(bundled_model_path()),
    ]
    command += ["--port", str(port), "--n_ctx", "2048", "--chat_format", "chatml-function-calling"]
    command += ["--n_threads", str(threads), "--n_threads_batch", str(threads)]
    # Its default cuts a streaming reply short whenever another request comes, kefu's
    # health checks (GET /v1/models) included.
    command += ["--interrupt_requests", "False"]
    url = f"http://127.0.0.1:{port}"
    with running(command, url + "/v1/models", "llama-cpp-server"):
        yield url + "/v1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, default=2, help="the engine's threads")
    args = parser.parse_args()
    with ExitStack() as stack:
        upstream = stack.enter_context(engine(args.threads))
        front = stack.enter_context(kefu_server("--engine", upstream, "--no-fast-path"))
        client = stack.enter_context(httpx.Client(timeout=120))
        print(f"bundled model {bundled_model_path().name}, {len(CASES)} messages, 3 tools\n")
        print("| via, tool_choice | asked | a call | valid JSON | right tool | right order id |")
        print("|---|---|---|---|---|---|")
        for named in (True, False):
            choice = "named" if named else "auto"
            for name, url in (("engine", upstream), ("kefu", front + "/v1")):
                counts = ask(client, url, named)
                print(counts.row(f"{name}, {choice}"))
                for error in counts.errors[:3]:
                    print(f"  error: {error}", file=sys.stderr)


if __name__ == "__main__":
    main()
