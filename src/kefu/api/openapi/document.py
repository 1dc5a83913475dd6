"""The OpenAPI 3.1 document of a running app, generated from its routes and wire models.

Every route the app has is walked; what it takes and answers comes from
``operations.py`` (in terms of the pydantic wire models), and the rest follows
from the route and the settings: path parameters, the errors a body or a path
parameter can cause, and the security the auth policy asks (none with --auth none).
Errors are the OpenAI envelope; SSE replies describe each event (``event`` and its
JSON ``data``, as ``contentSchema``), the reading schemathesis and OpenAPI 3.1 share.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel
from pydantic.json_schema import models_json_schema
from starlette.routing import BaseRoute, Route

from kefu import __version__
from kefu.api.openapi.operations import OPERATIONS, JsonSchema, Operation, Reply, Stream
from kefu.api.protocol import ErrorEnvelope
from kefu.auth.policy import counts_as_answer, required_scope
from kefu.settings import Settings
from kefu.settings.auth_mode import auth_mode

REF = "#/components/schemas/{model}"
PATH_PARAM = re.compile(r"{(\w+)(?::\w+)?}")
ENVELOPE = {"$ref": REF.format(model="ErrorEnvelope")}
ERRORS = {
    400: "Invalid request: malformed JSON, a wrong type, a missing field, a bad parameter.",
    401: "No credential, or one that is not valid.",
    403: "A valid caller without the scope this route needs.",
    404: "No such resource.",
    408: "The body did not arrive within --body-timeout; the connection is closed.",
    409: "The session is busy with another turn, or not in the state this needs.",
    413: "The body is over --max-body-bytes.",
    429: "The caller's rate limit or stream cap is spent.",
    500: "The engine failed this request (the server log has the details).",
    503: "Retry later: loading, the queue is full, a backend is down.",
}
HEADERS = {
    "X-Request-Id": "The request's id (the caller's own, if safe); the log and traces carry it.",
}
ERROR_HEADERS = {
    401: {"WWW-Authenticate": 'Bearer realm="kefu", error=…'},
    403: {"WWW-Authenticate": 'Bearer realm="kefu", error="insufficient_scope"'},
    429: {
        "Retry-After": "Seconds until a retry may succeed.",
        "X-RateLimit-Limit": "The caller's limit.",
        "X-RateLimit-Remaining": "What is left of it.",
        "X-RateLimit-Reset": "Seconds until it is full again.",
    },
    503: {"Retry-After": "Seconds until a retry may succeed."},
}
SECURITY_SCHEMES = {
    "bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API key (`kefu keys create`) or, with --auth jwt, a JWT.",
    },
    "apiKey": {"type": "apiKey", "in": "header", "name": "X-API-Key"},
    # EventSource cannot send headers: the chat page's live stream passes its token here.
    "accessToken": {"type": "apiKey", "in": "query", "name": "access_token"},
}
Mode = Literal["validation", "serialization"]


def build_document(routes: Sequence[BaseRoute], settings: Settings) -> dict[str, Any]:
    secured = auth_mode(settings) != "none"
    declared: list[tuple[str, Route, Operation | None]] = [
        (method, route, OPERATIONS.get((method, route.path)))
        for route in routes
        if isinstance(route, Route)
        for method in sorted((route.methods or set()) - {"HEAD"})
    ]
    wanted: dict[tuple[type[BaseModel], Mode], None] = {(ErrorEnvelope, "serialization"): None}
    for _, _, op in declared:
        wanted |= dict.fromkeys(_models(op) if op is not None else ())
    refs, schemas = models_json_schema(list(wanted), ref_template=REF)
    by_model = {model: ref for (model, _), ref in refs.items() if issubclass(model, BaseModel)}
    build = _Builder(refs=by_model, secured=secured)
    paths: dict[str, dict[str, Any]] = {}
    for method, route, op in declared:
        item = paths.setdefault(route.path, {})
        item[method.lower()] = (
            build.operation(method, route, op) if op is not None else _undeclared()
        )
    document: dict[str, Any] = {
        "openapi": "3.1.0",
        "info": {
            "title": "kefu",
            "version": __version__,
            "description": "Latency-first LLM customer service: an OpenAI-compatible API, "
            "the session chat API (SSE), human agents, the knowledge base, probes and "
            "metrics. Every error is the OpenAI envelope "
            '`{"error": {"message", "type", "param", "code"}}`.',
        },
        "paths": paths,
        "components": {"schemas": schemas.get("$defs", {})},
    }
    if secured:
        document["components"]["securitySchemes"] = SECURITY_SCHEMES
    return document


def _undeclared() -> dict[str, Any]:
    return {
        "summary": "Undeclared (no entry in kefu.api.openapi.operations)",
        "x-undeclared": True,
        "responses": {"default": {"description": "Undeclared."}},
    }


def _models(operation: Operation) -> Iterable[tuple[type[BaseModel], Mode]]:
    if operation.body is not None:
        yield operation.body, "validation"
    for reply in operation.replies:
        if reply.model is not None:
            yield reply.model, "serialization"
        if reply.stream is not None:
            for event_models in reply.stream.events.values():
                for model in event_models:
                    yield model, "serialization"


@dataclass(frozen=True)
class _Builder:
    refs: dict[type[BaseModel], JsonSchema]
    secured: bool

    def ref(self, model: type[BaseModel]) -> JsonSchema:
        return self.refs[model]

    def operation(self, method: str, route: Route, op: Operation) -> dict[str, Any]:
        path_params = PATH_PARAM.findall(route.path)
        parameters: list[dict[str, Any]] = [
            {
                "name": name,
                "in": "path",
                "required": True,
                "schema": {"type": "string", "minLength": 1},
            }
            for name in path_params
        ]
        parameters += [
            {
                "name": p.name,
                "in": "query",
                "required": p.required,
                "description": p.description,
                "schema": p.schema,
            }
            for p in op.query
        ]
        errors = set(op.errors)
        if op.body is not None or op.raw_body:
            errors |= {400, 408, 413}
        if op.query:
            errors.add(400)
        if path_params:
            errors.add(404)
        scope = required_scope(method, route.path)
        security: list[dict[str, list[str]]] = []
        if self.secured and scope is not None:
            errors |= {401, 403}
            security = [{"bearer": [scope]}, {"apiKey": [scope]}]
            if method == "GET" and route.path.endswith("/events"):
                security.append({"accessToken": [scope]})
        if not (self.secured and counts_as_answer(method, route.path)):
            errors.discard(429)  # only the auth guard's limits answer 429
        responses: dict[str, Any] = {str(reply.status): self.reply(reply) for reply in op.replies}
        for status in sorted(errors):
            responses.setdefault(
                str(status),
                {
                    "description": ERRORS[status],
                    "headers": _headers(HEADERS | ERROR_HEADERS.get(status, {})),
                    "content": {"application/json": {"schema": ENVELOPE}},
                },
            )
        operation: dict[str, Any] = {
            "operationId": _operation_id(method, route.path),
            "summary": op.summary,
            "tags": [op.tag],
            "parameters": parameters,
            "responses": responses,
            "security": security,
        }
        description = _doc(route)
        if description:
            operation["description"] = description
        if scope is not None and self.secured:
            operation["x-scope"] = scope
        if op.body is not None:
            operation["requestBody"] = {
                "required": True,
                "content": {"application/json": {"schema": self.ref(op.body)}},
            }
        elif op.raw_body:
            operation["requestBody"] = {
                "required": True,
                "content": {media: {"schema": schema} for media, schema in op.raw_body.items()},
            }
        return operation

    def reply(self, reply: Reply) -> dict[str, Any]:
        content: dict[str, Any] = {}
        if reply.model is not None:
            content["application/json"] = {"schema": self.ref(reply.model)}
        if reply.stream is not None:
            content["text/event-stream"] = {"schema": self.stream_schema(reply.stream)}
        for media, schema in reply.media.items():
            content[media] = {"schema": schema}
        out: dict[str, Any] = {
            "description": reply.description,
            "headers": _headers(HEADERS | dict(reply.headers)),
        }
        if content:
            out["content"] = content
        return out

    def stream_schema(self, stream: Stream) -> JsonSchema:
        """One SSE event: ``event`` (``message`` when the frame has no ``event:`` line) and its
        ``data``, JSON of one of the event's models (or one of the literal lines)."""
        variants: list[JsonSchema] = []
        for name, models in stream.events.items():
            payloads = [self.ref(model) for model in models]
            data: JsonSchema = {
                "type": "string",
                "contentMediaType": "application/json",
                "contentSchema": payloads[0] if len(payloads) == 1 else {"anyOf": payloads},
            }
            variants.append(_event(name, data))
        for literal in stream.literals:
            variants.append(_event("message", {"const": literal}))
        return {
            "anyOf": variants,
            "x-sse-events": {
                name: [model.__name__ for model in models] for name, models in stream.events.items()
            },
        }


def _event(name: str, data: JsonSchema) -> JsonSchema:
    return {
        "type": "object",
        "required": ["event", "data"],
        "properties": {"event": {"const": name}, "data": data},
    }


def _headers(headers: dict[str, str]) -> dict[str, Any]:
    return {
        name: {"description": text, "schema": {"type": "string"}, "required": name in HEADERS}
        for name, text in headers.items()
    }


def _operation_id(method: str, path: str) -> str:
    words = [w for w in re.split(r"[^A-Za-z0-9]+", PATH_PARAM.sub(r"by_\1", path)) if w]
    return "_".join([method.lower(), *words]) if words else method.lower() + "_root"


def _doc(route: Route) -> str:
    doc = (route.endpoint.__doc__ or "").strip()
    return doc.split("\n\n")[0].replace("\n", " ")
