"""Chinese streams as whole characters: a token that ends mid-character never leaks U+FFFD.

SmolLM2's byte-level tokens split most Chinese characters in two, so every reply
here exercises the UTF-8 hold-back in kefu.engine.text.StreamText.
"""

from __future__ import annotations

import re
from typing import Any

import httpx
import pytest

from tests.e2e.support import sse_frames

pytestmark = pytest.mark.e2e

QUESTION = "你好！我上周买的外套还没有到，请问我的订单什么时候发货？请用中文回答。"
CJK = re.compile(r"[\u4e00-\u9fff]")
REPLACEMENT = "\ufffd"


def stream_completion(http: httpx.Client, body: dict[str, Any]) -> tuple[list[str], str | None]:
    """Content deltas and finish_reason of a streamed completion."""
    deltas: list[str] = []
    finish_reason = None
    with http.stream("POST", "/v1/chat/completions", json=body | {"stream": True}) as response:
        assert response.status_code == 200
        # sse_frames decodes every frame as strict UTF-8: broken bytes on the wire fail here.
        for frame in sse_frames(response.iter_bytes()):
            if frame.data == "[DONE]":
                break
            for choice in frame.json()["choices"]:
                if choice["delta"].get("content"):
                    deltas.append(choice["delta"]["content"])
                finish_reason = choice.get("finish_reason") or finish_reason
    return deltas, finish_reason


def assert_no_broken_characters(deltas: list[str]) -> None:
    """No U+FFFD anywhere, also when the reply was cut by max_tokens mid-character."""
    assert deltas
    broken = [d for d in deltas if REPLACEMENT in d]
    assert not broken, f"U+FFFD in the stream: {broken} of {deltas}"


def test_chinese_stream_has_no_broken_characters(http: httpx.Client, model_id: str) -> None:
    body = {
        "model": model_id,
        "messages": [{"role": "user", "content": QUESTION}],
        "max_tokens": 64,
        "temperature": 0,
    }
    deltas, finish_reason = stream_completion(http, body)

    assert finish_reason in {"stop", "length"}
    assert_no_broken_characters(deltas)
    text = "".join(deltas)
    assert CJK.search(text), f"the model did not answer in Chinese, nothing was tested: {text!r}"
    assert len(deltas) > 5


def test_chinese_chat_turn_has_no_broken_characters(http: httpx.Client) -> None:
    tokens: list[str] = []
    done: dict[str, Any] = {}
    with http.stream("POST", "/chat", json={"message": QUESTION}) as response:
        assert response.status_code == 200
        for frame in sse_frames(response.iter_bytes()):
            if frame.event == "token":
                tokens.append(frame.json()["text"])
            elif frame.event == "done":
                done = frame.json()

    assert done["reply"] == "".join(tokens)
    stored = http.get(f"/sessions/{done['session_id']}").json()["messages"]
    assert [m["content"] for m in stored] == [QUESTION, done["reply"]]
    assert_no_broken_characters(tokens)


def test_reply_cut_mid_character_has_no_replacement_character(
    http: httpx.Client, model_id: str
) -> None:
    body = {
        "model": model_id,
        "messages": [{"role": "user", "content": QUESTION}],
        "temperature": 0,
    }
    # Precondition: the reply's first character takes two tokens (checked, not assumed).
    two = http.post("/v1/chat/completions", json=body | {"max_tokens": 2}).json()
    first = two["choices"][0]["message"]["content"]
    if two["usage"]["completion_tokens"] != 2 or len(first) != 1 or not CJK.match(first):
        pytest.skip(f"the first character is not two tokens on this model/CPU: {first!r}")

    deltas, finish_reason = stream_completion(http, body | {"max_tokens": 1})

    assert finish_reason == "length"
    assert REPLACEMENT not in "".join(deltas), deltas
