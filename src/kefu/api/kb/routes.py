"""Thin admin routes of the knowledge base: list, search, import, add, remove.

Every change goes through the fast path, which evicts the cached answers the
change affects before the next question is answered.
"""

from __future__ import annotations

from collections.abc import Sequence

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from kefu.api.body import read_body, read_model
from kefu.api.kb.protocol import ChangeOut, EntriesOut, EntryIn, EntryOut, HitOut, HitsOut
from kefu.errors import InvalidRequest, NotFound
from kefu.knowledge.base import KbChange, KnowledgeBase
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.importers import parse_bytes
from kefu.service.fast_path import FastPath
from kefu.service.runtime import Runtime

MAX_RESULTS = 50


def _json(model: EntriesOut | EntryOut | HitsOut | ChangeOut, status: int = 200) -> Response:
    return Response(model.model_dump_json(), status_code=status, media_type="application/json")


def _fast_path(request: Request) -> FastPath:
    runtime: Runtime = request.app.state.runtime
    return runtime.require_fast_path()


async def _replicate(
    request: Request, added: Sequence[KbEntry] = (), removed: Sequence[str] = ()
) -> None:
    """With --redis, the other replicas apply the change too (shared/changes.py)."""
    runtime: Runtime = request.app.state.runtime
    if runtime.replication is not None:
        await runtime.replication.kb_added(added)
        await runtime.replication.kb_removed(removed)


async def list_entries(request: Request) -> Response:
    fast_path = _fast_path(request)
    category = request.query_params.get("category")

    def read(kb: KnowledgeBase) -> list[KbEntry]:
        return kb.entries(category=category)

    entries = await fast_path.read_kb(read)
    return _json(EntriesOut(count=len(entries), entries=[EntryOut.of(e) for e in entries]))


async def search(request: Request) -> Response:
    fast_path = _fast_path(request)
    query = request.query_params.get("q", "").strip()
    if not query:
        raise InvalidRequest("give the question to search for as ?q=...", param="q")
    raw_k = request.query_params.get("k", "5")
    if not raw_k.isdigit() or not 1 <= int(raw_k) <= MAX_RESULTS:
        raise InvalidRequest(f"k must be a whole number from 1 to {MAX_RESULTS}", param="k")
    hits = await fast_path.read_kb(lambda kb: kb.search(query, k=int(raw_k)))
    return _json(HitsOut(query=query, hits=[HitOut.of_hit(hit) for hit in hits]))


async def import_file(request: Request) -> Response:
    """The file is the body; ``?filename=shop.csv`` says its format (.csv .json .jsonl .md)."""
    runtime: Runtime = request.app.state.runtime
    fast_path = runtime.require_fast_path()
    filename = request.query_params.get("filename", "").strip()
    if not filename:
        raise InvalidRequest(
            "name the file with ?filename=NAME.csv (or .json, .jsonl, .md)", param="filename"
        )
    data = await read_body(request, runtime.settings.max_body_bytes, runtime.settings.body_timeout)
    entries = parse_bytes(data, filename)  # fails whole, naming the line, before any write
    change = await fast_path.import_entries(entries)
    await _replicate(request, added=[*change.added, *change.updated])
    return _json(ChangeOut.of(change, await fast_path.read_kb(len)))


async def add_entry(request: Request) -> Response:
    runtime: Runtime = request.app.state.runtime
    fast_path = runtime.require_fast_path()
    body = await read_model(
        request, EntryIn, runtime.settings.max_body_bytes, runtime.settings.body_timeout
    )
    entry = KbEntry.make(body.question, body.answer, category=body.category, source="api")
    change = await fast_path.import_entries([entry])
    await _replicate(request, added=[*change.added, *change.updated])
    stored = await fast_path.read_kb(lambda kb: kb.get(entry.id))
    assert stored is not None
    created = any(added.id == entry.id for added in change.added)
    return _json(EntryOut.of(stored), 201 if created else 200)


async def entry(request: Request) -> Response:
    fast_path = _fast_path(request)
    entry_id = request.path_params["entry_id"]
    if request.method == "DELETE":

        def remove(kb: KnowledgeBase) -> KbChange:
            return kb.remove([entry_id])  # NotFound for an unknown id

        await fast_path.change_kb(remove)
        await _replicate(request, removed=[entry_id])
        return Response(status_code=204)
    found = await fast_path.read_kb(lambda kb: kb.get(entry_id))
    if found is None:
        raise NotFound(f"no knowledge-base entry {entry_id!r}", param="entry_id")
    return _json(EntryOut.of(found))


routes = [
    Route("/kb", list_entries, methods=["GET"]),
    Route("/kb/search", search, methods=["GET"]),
    Route("/kb/import", import_file, methods=["POST"]),
    Route("/kb/entries", add_entry, methods=["POST"]),
    Route("/kb/entries/{entry_id}", entry, methods=["GET", "DELETE"]),
]
