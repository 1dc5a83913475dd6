"""The official ``openai`` SDK, unchanged, against the app in-process.

Starlette's TestClient is an ``httpx2.Client``, the client class the SDK takes.
"""

from __future__ import annotations

import openai
import pytest
from openai import OpenAI
from starlette.testclient import TestClient

from kefu.engine.fake import FakeEngine


@pytest.fixture
def sdk(client: TestClient) -> OpenAI:
    return OpenAI(base_url="http://testserver/v1", api_key="x", http_client=client, max_retries=0)


def test_create(sdk: OpenAI, fake_engine: FakeEngine) -> None:
    completion = sdk.chat.completions.create(
        model="gpt-4o-mini",
        messages=[
            {"role": "developer", "content": "be brief"},
            {"role": "user", "content": "hello there"},
        ],
        max_tokens=50,
        temperature=0.2,
    )
    assert completion.id.startswith("chatcmpl-")
    assert completion.object == "chat.completion"
    assert completion.model == "gpt-4o-mini"
    (choice,) = completion.choices
    assert choice.index == 0
    assert choice.finish_reason == "stop"
    assert choice.message.role == "assistant"
    assert choice.message.content == "fake reply to: hello there"
    assert completion.usage is not None
    assert completion.usage.prompt_tokens == (2 + 3) + (2 + 3)
    assert completion.usage.completion_tokens == 5
    assert completion.usage.total_tokens == 15
    assert fake_engine.requests[-1].sampling.temperature == 0.2


def test_create_with_length_limit(sdk: OpenAI) -> None:
    completion = sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], max_completion_tokens=2
    )
    assert completion.choices[0].finish_reason == "length"
    assert completion.choices[0].message.content == "fake reply"


def test_stream(sdk: OpenAI) -> None:
    stream = sdk.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "where is my parcel"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    assert chunks[0].choices[0].delta.role == "assistant"
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "fake reply to: where is my parcel"
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices]
    assert finishes[-1] == "stop"
    assert all(f is None for f in finishes[:-1])
    assert chunks[-1].choices == []
    assert chunks[-1].usage is not None
    assert chunks[-1].usage.completion_tokens == 7
    assert len({c.id for c in chunks}) == 1


def test_stream_without_usage(sdk: OpenAI) -> None:
    stream = sdk.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "hi"}], stream=True
    )
    chunks = list(stream)
    assert all(c.usage is None for c in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


def test_models_list(sdk: OpenAI) -> None:
    models = list(sdk.models.list())
    assert [m.id for m in models] == ["fake-engine"]
    assert models[0].owned_by == "kefu"


def test_errors_become_sdk_exceptions(sdk: OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as raised:
        sdk.chat.completions.create(
            model="m",
            messages=[{"role": "user", "content": "hi"}],
            n=2,
        )
    assert raised.value.status_code == 400
    assert raised.value.param == "n"
    assert raised.value.code == "invalid_request"
