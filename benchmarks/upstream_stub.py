"""A minimal, fast OpenAI-compatible streaming server: the upstream of the gateway benchmark.

Plain asyncio and hand-written HTTP/1.1 (keep-alive, chunked SSE), so that at hundreds of
streams the upstream costs as little CPU as possible and what a gateway adds stands out.
It answers ``POST /v1/chat/completions`` (stream or not) with ``--words`` tokens, one every
``--token-delay`` seconds after ``--prefill-delay``; ``GET /v1/models`` and ``GET /health``.
With ``--tool-calls``, a streamed reply is one tool call whose arguments come a token a
chunk, as an engine streams a function call.

    python benchmarks/upstream_stub.py --port 9000 [--words 32] [--token-delay 0.02]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

MODEL = "stub"


def chunk(payload: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(payload), payload)


def sse(data: dict[str, object]) -> bytes:
    return chunk(b"data: " + json.dumps(data, separators=(",", ":")).encode() + b"\n\n")


class Stub:
    def __init__(
        self, words: int, token_delay: float, prefill_delay: float, tool_calls: bool = False
    ) -> None:
        self.words = words
        self.token_delay = token_delay
        self.prefill_delay = prefill_delay
        self.tool_calls = tool_calls

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {
                    k.strip().lower(): v.strip()
                    for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)
                }
                body = await reader.readexactly(int(headers.get("content-length", "0")))
                if method == "POST" and path.endswith("/chat/completions"):
                    await self.complete(json.loads(body or b"{}"), writer)
                elif path.endswith("/models"):
                    models = {"object": "list", "data": [{"id": MODEL, "object": "model"}]}
                    self.send_json(writer, models)
                elif path == "/health":
                    self.send_json(writer, {"status": "ok"})
                else:
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    def send_json(self, writer: asyncio.StreamWriter, data: object) -> None:
        payload = json.dumps(data).encode()
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
            % (len(payload), payload)
        )

    async def complete(self, request: dict[str, object], writer: asyncio.StreamWriter) -> None:
        words = min(self.words, int(str(request.get("max_tokens") or self.words)))
        created = int(time.time())
        base = {"id": "chatcmpl-stub", "object": "chat.completion.chunk", "created": created}
        base["model"] = MODEL
        usage = {"prompt_tokens": 10, "completion_tokens": words, "total_tokens": 10 + words}
        if self.prefill_delay:
            await asyncio.sleep(self.prefill_delay)
        if not request.get("stream"):
            await asyncio.sleep(self.token_delay * words)
            text = " ".join(f"w{i}" for i in range(words))
            message = {"role": "assistant", "content": text}
            self.send_json(
                writer,
                base
                | {
                    "object": "chat.completion",
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                    "usage": usage,
                },
            )
            return
        writer.write(
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\ncache-control: no-cache\r\n\r\n"
        )
        writer.write(sse(base | {"choices": [{"index": 0, "delta": {"role": "assistant"}}]}))
        for i in range(words):
            if self.token_delay:
                await asyncio.sleep(self.token_delay)
            piece = f" w{i}" if i else "w0"
            delta: dict[str, object] = {"content": piece}
            if self.tool_calls:
                call: dict[str, object] = {"index": 0, "function": {"arguments": piece}}
                if not i:
                    call |= {"id": "call_stub", "type": "function"}
                    call["function"] = {"name": "order_status", "arguments": piece}
                delta = {"content": None, "tool_calls": [call]}
            writer.write(sse(base | {"choices": [{"index": 0, "delta": delta}]}))
            await writer.drain()
        reason = "tool_calls" if self.tool_calls else "stop"
        finish = [{"index": 0, "delta": {}, "finish_reason": reason}]
        writer.write(sse(base | {"choices": finish}))
        writer.write(sse(base | {"choices": [], "usage": usage}))
        writer.write(chunk(b"data: [DONE]\n\n") + b"0\r\n\r\n")


async def serve(port: int, stub: Stub) -> None:
    server = await asyncio.start_server(stub.handle, "127.0.0.1", port, backlog=1024)
    async with server:
        await server.serve_forever()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--words", type=int, default=32)
    parser.add_argument("--token-delay", type=float, default=0.02)
    parser.add_argument("--prefill-delay", type=float, default=0.05)
    parser.add_argument("--tool-calls", action="store_true", help="stream a tool call")
    args = parser.parse_args()
    stub = Stub(args.words, args.token_delay, args.prefill_delay, args.tool_calls)
    asyncio.run(serve(args.port, stub))


if __name__ == "__main__":
    main()
