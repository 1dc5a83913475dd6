"""Bad input a schema cannot describe, sent over raw sockets to a running ``kefu serve``.

Shared by tests/e2e/test_bad_input.py and benchmarks/bad_input.py. Each probe writes
bytes exactly as given (broken UTF-8, a body trickled a byte at a time, two requests in
one write) and reads what comes back until the server closes the connection; every
request says ``Connection: close``.
"""

from __future__ import annotations

import contextlib
import json
import re
import socket
import sqlite3
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

READ_LIMIT_S = 30.0
STATUS_LINE = re.compile(rb"HTTP/1\.1 (\d{3}) ")
TEN_MB = 10 * 1024 * 1024


@dataclass(frozen=True)
class Answer:
    statuses: list[int]  # one per response read (two for a pipelined pair)
    body: bytes  # the last response's body
    seconds: float


@dataclass(frozen=True)
class Probe:
    name: str
    send: Callable[[socket.socket], None]
    expect: tuple[int, ...]  # the status of each response, in order
    code: str | None = None  # the envelope's code, when the last status is an error


def request(
    method: str, path: str, body: bytes = b"", content_type: str = "application/json"
) -> bytes:
    head = f"{method} {path} HTTP/1.1\r\nHost: kefu\r\nConnection: close\r\n"
    if body or method == "POST":
        head += f"Content-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
    return head.encode() + b"\r\n" + body


def _write(data: bytes) -> Callable[[socket.socket], None]:
    def send(sock: socket.socket) -> None:
        # The server may answer (413) and close before the rest is sent.
        with contextlib.suppress(OSError):
            sock.sendall(data)

    return send


def _trickle(head: bytes, body: bytes, every: float) -> Callable[[socket.socket], None]:
    """The headers at once, then the body a byte per ``every`` seconds (slow loris)."""

    def send(sock: socket.socket) -> None:
        sock.sendall(head)
        deadline = time.monotonic() + READ_LIMIT_S
        for byte in body:
            try:
                sock.sendall(bytes([byte]))
            except OSError:
                return
            sock.settimeout(every)
            try:  # the server may answer (408) mid-trickle
                if sock.recv(1, socket.MSG_PEEK):
                    return
            except TimeoutError:
                pass
            if time.monotonic() > deadline:
                return

    return send


def _chunked(path: str, size: int) -> Callable[[socket.socket], None]:
    head = (
        f"POST {path} HTTP/1.1\r\nHost: kefu\r\nConnection: close\r\n"
        "Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
    ).encode()
    chunk = b"x" * 65536
    frame = f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n"

    def send(sock: socket.socket) -> None:
        try:
            sock.sendall(head)
            for _ in range(size // len(chunk)):
                sock.sendall(frame)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass

    return send


def _chat(body: bytes) -> bytes:
    return request("POST", "/chat", body)


def _v1(extra: str) -> bytes:
    return request(
        "POST",
        "/v1/chat/completions",
        ('{"messages": [{"role": "user", "content": "hi"}]' + extra + "}").encode(),
    )


def probes(body_timeout: float) -> list[Probe]:
    slow_body = json.dumps({"message": "where is my order?"}).encode()
    slow_head = (
        "POST /chat HTTP/1.1\r\nHost: kefu\r\nConnection: close\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(slow_body)}\r\n\r\n"
    ).encode()
    pipelined = b"GET /health HTTP/1.1\r\nHost: kefu\r\n\r\n" + request("GET", "/v1/models")
    return [
        Probe("malformed UTF-8", _write(_chat(b'{"message": "bad \xff\xfe bytes"}')), (400,)),
        Probe("truncated UTF-8", _write(_chat(b'{"message": "\xe4\xbd"}')), (400,)),
        Probe("truncated JSON", _write(_chat(b'{"message": "where is')), (400,)),
        Probe("lone surrogate \\ud800", _write(_chat(b'{"message": "\\ud800"}')), (400,)),
        Probe("NUL byte, raw", _write(_chat(b'{"message": "a\x00b"}')), (400,)),
        Probe("NUL, escaped \\u0000", _write(_chat(b'{"message": "a\\u0000b"}')), (400,)),
        Probe(
            "10 MB body (Content-Length)",
            _write(_chat(b'{"message": "' + b"x" * TEN_MB + b'"}')),
            (413,),
            "payload_too_large",
        ),
        Probe("10 MB body (chunked)", _chunked("/chat", TEN_MB), (413,), "payload_too_large"),
        Probe(
            "JSON nested 100 000 deep",
            _write(_chat(b'{"message": "hi", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")),
            (400,),
        ),
        Probe("number with 5 000 digits", _write(_v1(', "max_tokens": ' + "9" * 5000)), (400,)),
        Probe("temperature 1e999", _write(_v1(', "temperature": 1e999')), (400,)),
        Probe(
            "multipart/form-data body",
            _write(
                request(
                    "POST", "/chat", b"--x\r\n\r\nhi\r\n--x--", "multipart/form-data; boundary=x"
                )
            ),
            (400,),
        ),
        Probe(
            "form-urlencoded, not JSON",
            _write(request("POST", "/chat", b"message=hi", "application/x-www-form-urlencoded")),
            (400,),
        ),
        Probe(
            f"slow-loris body (1 byte / {body_timeout / 4:g} s)",
            _trickle(slow_head, slow_body, body_timeout / 4),
            (408,),
            "request_timeout",
        ),
        Probe("two requests in one write", _write(pipelined), (200, 200)),
        Probe(
            "a million-character message",
            _write(_chat(json.dumps({"message": "a" * 1_000_000}).encode())),
            (400,),
        ),
        Probe("max_tokens 0", _write(_v1(', "max_tokens": 0')), (400,)),
        Probe("max_tokens -1", _write(_v1(', "max_tokens": -1')), (400,)),
        Probe("max_completion_tokens 0", _write(_v1(', "max_completion_tokens": 0')), (400,)),
        # Not refused, by design: clamped to the room left in the context window.
        Probe("max_tokens 10^9 (clamped)", _write(_v1(', "max_tokens": 1000000000')), (200,)),
        # Not refused, by design: one model is served, and any name is answered by it.
        Probe("unknown model (served)", _write(_v1(', "model": "no-such-model"')), (200,)),
        Probe(
            "session_id '../../etc/passwd'",
            _write(_chat(b'{"message": "hi", "session_id": "../../etc/passwd"}')),
            (404,),
            "not_found",
        ),
        Probe(
            "session_id with NUL",
            _write(_chat(b'{"message": "hi", "session_id": "a\\u0000b"}')),
            (400,),
        ),
        Probe(
            "GET /sessions/..%2F..%2Fetc", _write(request("GET", "/sessions/..%2F..%2Fetc")), (404,)
        ),
        Probe("GET /sessions/%00", _write(request("GET", "/sessions/%00")), (404,), "not_found"),
        Probe(
            "DELETE /sessions/..%2Fx",
            _write(request("DELETE", "/sessions/..%2Fx")),
            (404,),
        ),
    ]


def exchange(host: str, port: int, probe: Probe) -> Answer:
    """Send the probe; read until the server closes, within READ_LIMIT_S."""
    started = time.perf_counter()
    with socket.create_connection((host, port), timeout=READ_LIMIT_S) as sock:
        probe.send(sock)
        sock.settimeout(READ_LIMIT_S)
        received = bytearray()
        deadline = time.monotonic() + READ_LIMIT_S
        while time.monotonic() < deadline:
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not data:
                break
            received += data
    seconds = time.perf_counter() - started
    return Answer(_statuses(bytes(received)), _last_body(bytes(received)), seconds)


def _statuses(raw: bytes) -> list[int]:
    # A pipelined second response starts right after the first one's body, mid-line.
    return [int(status) for status in STATUS_LINE.findall(raw)]


def _last_body(raw: bytes) -> bytes:
    return raw.rsplit(b"\r\n\r\n", 1)[-1] if b"\r\n\r\n" in raw else b""


def envelope_code(body: bytes) -> str | None:
    """The envelope's code, or raises if the body is not the OpenAI error envelope."""
    error = json.loads(body)["error"]
    assert set(error) == {"message", "type", "param", "code"}, error
    assert error["message"], error
    code: str | None = error["code"]
    return code


def stored_counts(data_dir: Path) -> tuple[int, int]:
    """Sessions and messages in the server's SQLite store (read-only, beside a live writer)."""
    path = data_dir / "sessions.db"
    if not path.exists():
        return 0, 0
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        sessions = db.execute("SELECT count(*) FROM sessions").fetchone()[0]
        messages = db.execute("SELECT count(*) FROM messages").fetchone()[0]
    return int(sessions), int(messages)
