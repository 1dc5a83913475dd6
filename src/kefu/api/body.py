"""Read a JSON request body into a wire model, with a size limit and errors a person understands."""

from __future__ import annotations

import asyncio
import re
from typing import TypeVar

from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect, Request

from kefu.api.disconnect import ClientGone
from kefu.errors import InvalidRequest, PayloadTooLarge, RequestTimeout

M = TypeVar("M", bound=BaseModel)
# Bodies that are not JSON by their type (``curl -d`` sends JSON as form-urlencoded: accepted).
NOT_JSON = {"multipart/form-data", "application/xml", "text/xml", "application/octet-stream"}

# pydantic names the member of a union in an error's location: "str", "list[TextPart]"...
_UNION_MEMBER = re.compile(r"str|int|float|bool|none|[A-Z]\w*|[\w-]+\[.*\]")


async def read_body(request: Request, limit: int, seconds: float) -> bytes:
    """The whole body, at most ``limit`` bytes, within ``seconds``: neither a
    long body nor one trickled a byte at a time (slow loris) holds the request open.
    Uvicorn bounds the wait between requests but not the body's arrival. A client that
    leaves before its body is whole raises ClientGone: nobody is left to answer."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise PayloadTooLarge(f"the request body is {declared} bytes; the limit is {limit}")
    body = bytearray()
    try:
        async with asyncio.timeout(seconds):
            async for chunk in request.stream():
                body += chunk
                if len(body) > limit:
                    raise PayloadTooLarge(f"the request body is over the limit of {limit} bytes")
    except TimeoutError:
        raise RequestTimeout(
            f"the request body did not arrive within {seconds:g} s ({len(body)} bytes came)"
        ) from None
    except ClientDisconnect:
        raise ClientGone from None
    return bytes(body)


async def read_model(request: Request, model: type[M], limit: int, seconds: float) -> M:
    body = await read_body(request, limit, seconds)
    if not body.strip():
        raise InvalidRequest("the request body is empty; send a JSON object")
    try:
        return model.model_validate_json(body)
    except ValidationError as exc:
        error = validation_error(exc)
        media = request.headers.get("content-type", "").partition(";")[0].strip().lower()
        if error.message.startswith("the request body is not valid JSON") and media in NOT_JSON:
            error.message += f" (it was sent as {media}; send JSON as application/json)"
        raise error from None


def validation_error(exc: ValidationError) -> InvalidRequest:
    """The first problem, named by its JSON path, as one InvalidRequest."""
    errors = exc.errors(include_url=False)
    error = errors[0]
    if any(_is_union_member(part) for part in error["loc"]):
        # Every member of a union failed; one that got past the type check explains best.
        error = next((e for e in errors if not e["type"].endswith("_type")), error)
    path = ".".join(str(part) for part in error["loc"] if not _is_union_member(part))
    message = str(error["msg"]).removeprefix("Value error, ")
    if error["type"] == "json_invalid":
        return InvalidRequest(f"the request body is not valid JSON: {error['ctx']['error']}")
    if error["type"] == "model_type" and not path:
        return InvalidRequest("the request body must be a JSON object")
    if error["type"] == "missing":
        return InvalidRequest(f"'{path}' is required", param=path)
    return InvalidRequest(f"'{path}': {message}", param=path or None)


def _is_union_member(part: str | int) -> bool:
    return isinstance(part, str) and _UNION_MEMBER.fullmatch(part) is not None
