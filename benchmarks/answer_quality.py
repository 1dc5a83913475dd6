"""How well the fast path answers: retrieval, answers from the knowledge base, routing, cache.

Starts ``kefu serve --engine fake`` on a fresh data dir (the bundled demo knowledge base
loads into the empty store) and sends every row of ``data/answer_quality.csv`` as the
first message of a new session, then the pairs of ``data/cache_pairs.csv``:

  retrieval   paraphrase rows: ``GET /kb/search`` top hit is the expected KB question
  e5 top-1    paraphrase rows: the second look's nearest FAQ question (multilingual-e5-small,
              in this process, no margin asked) carries the expected answer; "either" when
              one of the two retrievers' top hits does: what the best choice between them,
              answering every paraphrase and guarding against nothing, could reach
  answered    paraphrase rows: answered from the KB or the cache (tier faq|cache) with the
              expected question as the source (the "top-1 accuracy" figure); a cache hit's
              source is the message cached earlier, right when it is a paraphrase of the
              same entry in the data file
  false hits  a row not meant for the KB (expected intent other than faq) answered from the
              KB or the cache, or a paraphrase answered from the wrong entry (the target's
              row, over the data file's messages); then again with the cache probes: a
              same=0 pair answered from the cache, or a pair's question answered from the KB
  routing     all rows: the ``done`` event's route.intent is the expected intent
  cache       per pair: ``cached_question`` in a new session (goes to the LLM and is cached),
              then ``question`` in another new session; same=1 should hit, same=0 must not

Thresholds are tuned on ``--split dev`` and reported on ``--split test``. Two sets of
realistic messages (long, with products, places and typos) were written by writers
who saw only the demo knowledge base: ``--split fresh`` (``data/answer_quality_fresh.csv``)
after the second round of tuning, and used since then to tune too (the catalogue,
``--faq-threshold-zh``, ``--faq-margin``); ``--split fresh2``
(``data/answer_quality_fresh2.csv``) after that. ``--split fresh3``
(``data/answer_quality_fresh3.csv``) is in the style of dev and test (short paraphrases,
near misses, out-of-scope, order, handoff and smalltalk messages), written after the
test split had been looked at too often to count as held out; the second look's
constants were chosen in tables that showed it too. ``--split fresh4``
(``data/answer_quality_fresh4.csv``), the same mix, was written after the second look
had landed by a writer who saw only the demo knowledge base (not the other sets, nor
the code), and first measured on 3091a88.
The figures are printed, never judged: the exit status is 1 only when requests failed.
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import json
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from harness import kefu_server, sse_events
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.second_look import E5Transformer, Known, SecondLook

DATA = Path(__file__).parent / "data"
KB_TIERS = {"faq", "cache"}
TARGETS = {"answered": "≥ 90 %", "false hits, messages": "≤ 2 %", "routing": "≥ 95 %"}
# The false-hit rates, each over the rows of its parts.
_MESSAGE_PARTS = ("wrong KB entry", "non-FAQ answered from KB")
_PROBE_PARTS = ("cache-pair question from KB", "cache false hits (same=0)")
POOLED = {"false hits, messages": _MESSAGE_PARTS, "false hits": _MESSAGE_PARTS + _PROBE_PARTS}


@dataclass
class Reply:
    """What one ``POST /chat`` stream said, with client-side times (perf_counter seconds)."""

    sent: float
    end: float = 0.0
    done: float | None = None  # the done event arrived
    first_token: float | None = None
    status: int = 0
    tier: str | None = None
    intent: str | None = None
    reason: str | None = None  # the route's reason: why general, or "second look: …"
    source: dict[str, Any] | None = None
    text: str = ""
    handoff: bool = False
    error: str | None = None
    server_e2e_ms: float | None = None  # the done event's own e2e: no client-side queueing
    timings: dict[str, float] = field(default_factory=dict)  # the done event's timings

    @property
    def source_question(self) -> str | None:
        return (self.source or {}).get("question")

    def describe(self) -> str:
        if self.error:
            return f"error {self.error}"
        got = f"tier={self.tier} intent={self.intent}"
        return got + (f" source={self.source_question!r}" if self.source else "")


async def post_chat(client: httpx.AsyncClient, base_url: str, message: str) -> Reply:
    """Send ``message`` as the first turn of a new session and read the SSE to ``done``."""
    reply = Reply(sent=time.perf_counter())
    parts: list[str] = []
    try:
        async with client.stream("POST", base_url + "/chat", json={"message": message}) as r:
            reply.status = r.status_code
            if r.status_code != 200:
                await r.aread()
                reply.error = f"HTTP {r.status_code}"
                return reply
            async for sse in sse_events(r):
                body = json.loads(sse.data)
                if sse.event == "token" and body.get("text"):
                    reply.first_token = reply.first_token or time.perf_counter()
                    parts.append(body["text"])
                elif sse.event == "handoff":
                    reply.handoff = True
                elif sse.event == "error":
                    reply.error = str(body.get("message") or body)[:120]
                elif sse.event == "done":
                    reply.done = time.perf_counter()
                    reply.tier = body.get("tier")
                    reply.intent = (body.get("route") or {}).get("intent")
                    reply.reason = (body.get("route") or {}).get("reason")
                    reply.source = body.get("source")
                    reply.timings = body.get("timings") or {}
                    reply.server_e2e_ms = reply.timings.get("e2e_ms")
    except httpx.HTTPError as exc:
        reply.error = type(exc).__name__
    reply.end = time.perf_counter()
    reply.text = "".join(parts)
    if reply.error is None and reply.tier is None:
        reply.error = "stream ended without done"
    return reply


async def top_hit(client: httpx.AsyncClient, base_url: str, message: str) -> str | None:
    r = await client.get(base_url + "/kb/search", params={"q": message, "k": 5})
    r.raise_for_status()
    hits = r.json().get("hits") or []
    return hits[0]["question"] if hits else None


@dataclass
class Tally:
    """Counts for one language (or all)."""

    counts: dict[str, list[int]] = field(default_factory=dict)  # name -> [hits, total]

    def add(self, name: str, ok: bool, counted: bool = True) -> None:
        if counted:
            pair = self.counts.setdefault(name, [0, 0])
            pair[0] += int(ok)
            pair[1] += 1

    def pool(self, name: str, parts: Sequence[str]) -> None:
        """``name`` counts what ``parts`` count, together."""
        pairs = [self.counts[part] for part in parts if part in self.counts]
        self.counts[name] = [sum(p[0] for p in pairs), sum(p[1] for p in pairs)]

    def cell(self, name: str) -> str:
        hits, total = self.counts.get(name, [0, 0])
        rate = f"{100 * hits / total:5.1f} %" if total else "    - "
        return f"{rate} ({hits}/{total})"


def load_csv(path: Path) -> list[dict[str, str]]:
    with path.open(encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f))


def answer_key(rows: Sequence[dict[str, str]]) -> dict[str, str]:
    """Which KB question answers a message: each KB question itself and every paraphrase.

    A cache hit's source is the earlier message whose reply was cached; it answers the row
    right when that message is the same KB entry's question or one of its paraphrases."""
    key = {r["expected_question"]: r["expected_question"] for r in rows if r["expected_question"]}
    key.update({r["message"]: r["expected_question"] for r in rows if r["expected_question"]})
    return key


def nearest_faq(entries: Sequence[dict[str, Any]]) -> Callable[[str], str | None]:
    """The question of the knowledge base's FAQ nearest a message by the second look's
    transformer, with no margin asked. The demo's vectors ship with kefu; another
    knowledge base is embedded here first."""
    known = [Known.of(KbEntry(**e)) for e in entries]  # /kb lists an entry's own fields
    question_of = {e["id"]: e["question"] for e in entries}
    with tempfile.TemporaryDirectory() as tmp:
        look = SecondLook(E5Transformer(), Path(tmp) / "e5.npz")
        while look.sync(known, limit=1024):
            print("  embedding the knowledge base for the e5 top-1", file=sys.stderr)

    def nearest(message: str) -> str | None:
        found = look.nearest(look.model.embed_queries([message])[0])
        return None if found is None else question_of[found.entry_id]

    return nearest


async def evaluate(
    base_url: str,
    rows: Sequence[dict[str, str]],
    pairs: Sequence[dict[str, str]],
    settle: float,
    key: dict[str, str],
) -> tuple[dict[str, Tally], list[tuple[str, ...]], int]:
    tallies = {lang: Tally() for lang in ("en", "zh", "all")}
    failures: list[tuple[str, ...]] = []
    errors = 0

    def tally(lang: str, name: str, ok: bool, counted: bool = True) -> None:
        for key in (lang, "all"):
            tallies[key].add(name, ok, counted)

    async with httpx.AsyncClient(timeout=60) as client:
        # An entry is its answer: a KB keeps several phrasings (questions) per answer.
        listing = await client.get(base_url + "/kb")
        listing.raise_for_status()
        entries = listing.json()["entries"]
        answer_of = {e["question"]: e["answer"] for e in entries}
        nearest = nearest_faq(entries)

        def same_entry(question: str | None, expected: str | None) -> bool:
            if question is None or expected is None:
                return False
            answer = answer_of.get(question) or answer_of.get(key.get(question, ""))
            return answer is not None and answer == answer_of.get(expected)

        for n, row in enumerate(rows, 1):
            lang, kind, message, want = (
                row["lang"],
                row["kind"],
                row["message"],
                row["expected_intent"],
            )
            expected_q = row["expected_question"] or None
            reply = await post_chat(client, base_url, message)
            if reply.error:
                errors += 1
                failures.append((lang, kind, message, want, reply.describe()))
                continue
            from_kb = reply.tier in KB_TIERS
            tally(lang, "routing", reply.intent == want)
            problems = [] if reply.intent == want else ["route"]
            if kind == "paraphrase":
                try:
                    hit = await top_hit(client, base_url, message)
                except httpx.HTTPError as exc:
                    errors += 1
                    hit = f"/kb/search failed: {exc!r}"[:100]
                source = reply.source_question or ""
                right = from_kb and same_entry(source, expected_q)
                hit_right = same_entry(hit, expected_q)
                e5_right = same_entry(nearest(message), expected_q)
                tally(lang, "retrieval", hit_right)
                tally(lang, "e5 top-1", e5_right)
                tally(lang, "either top-1", e5_right or hit_right)
                tally(lang, "answered", right)
                wrong_entry = from_kb and not right
                tally(lang, "wrong KB entry", not wrong_entry)
                if not right:
                    problems.append("wrong entry" if wrong_entry else "not answered")
                if not hit_right:
                    problems.append(f"search top-1={hit!r}")
            elif want != "faq":
                tally(lang, "non-FAQ answered from KB", not from_kb)
                if from_kb:
                    problems.append("false hit")
            if problems:
                expected = f"{want}" + (f" {expected_q!r}" if expected_q else "")
                failures.append(
                    (lang, kind, message, expected, reply.describe(), ", ".join(problems))
                )
            if n % 50 == 0:
                print(f"  {n}/{len(rows)} rows", file=sys.stderr)

        for pair in pairs:
            lang, same = pair["lang"], pair["same"] == "1"
            seed = await post_chat(client, base_url, pair["cached_question"])
            await asyncio.sleep(settle)  # the cache is written after the reply
            probe = await post_chat(client, base_url, pair["question"])
            if seed.error or probe.error:
                errors += 1
                failures.append(
                    (lang, "cache", pair["question"], "-", (seed.error or probe.error) or "")
                )
                continue
            for reply in (seed, probe):  # neither question is in the KB
                tally(lang, "cache-pair question from KB", reply.tier != "faq")
            if probe.tier == "faq" or seed.tier == "faq":
                got = f"seed {seed.describe()}; probe {probe.describe()}"
                failures.append((lang, "cache", pair["question"], "general", got, "false hit"))
            cached = seed.tier == "llm"
            tally(lang, "cache seeds answered by llm", cached)
            cached_hit = probe.tier == "cache"
            if same:
                tally(lang, "cache hit (same=1)", cached_hit, counted=cached)
            else:
                tally(lang, "cache false hits (same=0)", not cached_hit)
            if cached_hit != same and (cached or not same):
                what = "cache hit expected" if same else "false cache hit"
                got = probe.describe() + f" (seed tier={seed.tier})"
                failures.append(
                    (lang, "cache", pair["question"], pair["cached_question"], got, what)
                )
    for t in tallies.values():
        for pooled, parts in POOLED.items():
            t.pool(pooled, parts)
    return tallies, failures, errors


# name, what counts as "ok" in the tally (false-hit rows count the rows that were NOT false hits)
ROWS: list[tuple[str, str, bool]] = [
    ("retrieval", "retrieval top-1 (/kb/search)", False),
    ("e5 top-1", "  e5 top-1 (second look, no margin)", False),
    ("either top-1", "  either retriever's top-1", False),
    ("answered", "answered top-1 (tier faq|cache)", False),
    ("routing", "routing (route.intent)", False),
    ("false hits, messages", "false hits, data-file messages", True),
    ("false hits", "false hits, with the cache probes", True),
    ("wrong KB entry", "  paraphrase from wrong entry", True),
    ("non-FAQ answered from KB", "  non-FAQ row from KB/cache", True),
    ("cache false hits (same=0)", "  cache probe, same=0 hit", True),
    ("cache-pair question from KB", "  cache-pair question from KB", True),
    ("cache hit (same=1)", "cache hit rate, same=1", False),
    ("cache seeds answered by llm", "cache seeds that went to llm", False),
]


def inverted(t: Tally, name: str) -> str:
    hits, total = t.counts.get(name, [0, 0])
    return Tally({name: [total - hits, total]}).cell(name)


def print_table(tallies: dict[str, Tally], only: Sequence[str] | None = None) -> None:
    """The metrics of ``ROWS`` (or the ``only`` ones) per language."""
    print(f"\n{'metric':34} {'en':>18} {'zh':>18} {'all':>18}  target")
    for name, label, invert in ROWS:
        if only is not None and name not in only:
            continue
        cell: Callable[[Tally, str], str] = inverted if invert else Tally.cell
        cells = " ".join(f"{cell(tallies[lang], name):>18}" for lang in ("en", "zh", "all"))
        print(f"{label:34} {cells}  {TARGETS.get(name, '')}")


def summary(tallies: dict[str, Tally]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for lang, t in tallies.items():
        out[lang] = {name: {"ok": ok, "total": total} for name, (ok, total) in t.counts.items()}
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--split",
        choices=["dev", "test", "fresh", "fresh2", "fresh3", "fresh4", "all"],
        default="test",
        help="dev: thresholds are chosen on it (with fresh); test: reported on; fresh, "
        "fresh2 (data/answer_quality_fresh*.csv): realistic messages by writers who saw "
        "only the demo knowledge base; fresh3, fresh4: short messages in the style of "
        "dev and test, fresh4 held out",
    )
    parser.add_argument("--json", type=Path, help="write the counts and failures here")
    parser.add_argument(
        "--settle", type=float, default=0.2, help="seconds between a cache seed and its probe"
    )
    parser.add_argument("--no-cache", action="store_true", help="skip the cache probes")
    parser.add_argument(
        "--url", help="use a running kefu instead of starting one (its KB must be the demo)"
    )
    parser.add_argument(
        "--serve-flag",
        action="append",
        default=[],
        metavar="FLAG",
        help="extra kefu serve flag, e.g. --serve-flag=--faq-precision=0.9 (repeatable)",
    )
    args = parser.parse_args(argv)

    every_row = [row for path in sorted(DATA.glob("answer_quality*.csv")) for row in load_csv(path)]
    rows = [r for r in every_row if args.split in ("all", r["split"])]
    pairs = [] if args.no_cache else load_csv(DATA / "cache_pairs.csv")
    print(f"{len(rows)} rows ({args.split}), {len(pairs)} cache pairs", file=sys.stderr)

    def run(url: str) -> tuple[dict[str, Tally], list[tuple[str, ...]], int]:
        return asyncio.run(evaluate(url, rows, pairs, args.settle, answer_key(every_row)))

    if args.url:
        tallies, failures, errors = run(args.url.rstrip("/"))
    else:
        with kefu_server("--engine", "fake", *args.serve_flag) as url:
            tallies, failures, errors = run(url)

    print_table(tallies)
    print(f"\nrequest errors: {errors}")
    if failures:
        print(
            f"\nfailures ({len(failures)}, first 30): lang | kind | message | expected | got | why"
        )
        for failure in failures[:30]:
            print("  " + " | ".join(failure))
    if args.json:
        report = {"split": args.split, "errors": errors, "counts": summary(tallies)}
        report["failures"] = [list(f) for f in failures]
        args.json.write_text(json.dumps(report, ensure_ascii=False, indent=2), encoding="utf-8")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
