"""WeChat's 5-second window (issue 39): how many answers go back in the reply to WeChat's
request, how long the rest take through the customer-service API, and that none is
doubled or lost, with WeChat's clock and three tries, a replica killed mid-answer, and
one access token for every replica.

WeChat's side is tests/wechat/simulator.py: the server that POSTs signed XML to the
account's URL (5 s clock, three tries; 安全模式 with --encrypted) and a stand-in for its
APIs that records what kefu sends. Each simulated user sends --turns messages, one after
another (the next once the previous was answered), --users at once.

Scenarios (each its own `kefu serve`):
  model       the bundled model, one replica (skip with --skip-model)
  slow fake   a FakeEngine whose replies take 1-9 s (token delay x message length)
  naive       the baseline: a bridge that waits for /chat inside WeChat's request and
              replies passively, nothing else (no dedupe, no API), on the slow fake
  replicas    two replicas on one Redis, slow fake, each try to the next replica,
              replica 0 killed a third of the way in; tokens living --token-life s

Per scenario: passive share; time to the answer (passive: to the reply; API: first POST
to the message at the stand-in) p50/p99; WeChat's error shown (three tries unanswered);
duplicates (a message answered more than once, or its turn stored twice); lost (no answer
within --wait s); could not answer (the channel's clear text: the engine refused or
failed past its patience); token fetches.

    .venv/bin/python benchmarks/wechat.py [--users 6] [--turns 5] [--skip-model]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
import xmltodict
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from harness import metric_sum

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/ beside benchmarks/

from tests.e2e.support import KefuServer
from tests.shared.support import running_redis
from tests.wechat.conftest import APP_ID, SECRET, TOKEN, aes_key
from tests.wechat.simulator import (
    OfficialAccountSimulator,
    WeChatPlatform,
    serve_in_thread,
)

from harness import percentile
from kefu.channels.wechat.answers import PATIENCE_SECONDS, UNAVAILABLE_TEXT, session_name

QUESTIONS = (
    "How long does delivery take to Shanghai?",
    "Can I return a lamp I bought three weeks ago?",
    "你们的沙发可以定制尺寸吗？",
    "What should I do if my parcel arrived damaged?",
    "怎么开发票？",
    "Do you have any tips for cleaning a wool rug?",
    "我想改一下收货地址",
    "Which mattress is best for back pain?",
)


@dataclass
class Outcome:
    user: str
    turn: int
    text: str
    sent_at: float
    passive: bool = False
    seconds: float | None = None  # to the answer
    deliveries: int = 0  # passive reply + API messages that answer it
    unable: bool = False  # answered with the channel's "cannot answer now" text
    wechat_error: bool = False  # every try went unanswered
    tries: int = 0


@dataclass
class Report:
    scenario: str
    messages: int
    passive: int
    via_api: int
    lost: int
    unable: int
    duplicates: int
    stored_twice: int
    not_stored: int
    wechat_errors: int
    retries: int
    passive_p50_s: float
    passive_p99_s: float
    api_p50_s: float
    api_p99_s: float
    token_fetches: int
    wall_s: float
    notes: list[str] = field(default_factory=list)
    odd: list[str] = field(default_factory=list)  # the messages lost or answered twice


def message_text(kind: str, user: int, turn: int, rng: random.Random) -> str:
    if kind == "model":
        return QUESTIONS[(user + turn) % len(QUESTIONS)]
    # The fake engine says "fake reply to: <message>" a word per --fake-token-delay.
    return f"u{user}t{turn} " + " ".join("word" for _ in range(rng.randint(3, 45)))


async def run_users(
    account: OfficialAccountSimulator,
    platform: WeChatPlatform,
    *,
    kind: str,
    users: int,
    turns: int,
    wait: float,
    seed: int,
    route: Callable[[int, int], int] = lambda user, turn: 0,
    on_turn: Callable[[int], None] = lambda n: None,
) -> list[Outcome]:
    rng = random.Random(seed)
    outcomes: list[Outcome] = []
    counter = [0]

    async def user_loop(u: int, client: httpx.AsyncClient) -> None:
        user = f"o-bench-{seed}-{u}"
        for t in range(turns):
            text = message_text(kind, u, t, rng)
            outcome = Outcome(user, t, text, time.perf_counter())
            outcomes.append(outcome)
            before = len(platform.texts_to(user))
            counter[0] += 1
            on_turn(counter[0])
            delivery = await account.deliver(client, account.text(user, text), route(u, t))
            outcome.tries = len(delivery.tries)
            outcome.wechat_error = delivery.failed
            if delivery.reply is not None:
                outcome.passive = True
                outcome.deliveries = 1
                outcome.seconds = sum(t.seconds for t in delivery.tries)
            deadline = time.perf_counter() + (1.0 if outcome.passive else wait)
            while time.perf_counter() < deadline:  # an API message, or a duplicate
                if len(platform.texts_to(user)) > before:
                    if outcome.seconds is None:
                        outcome.seconds = time.perf_counter() - outcome.sent_at
                    break
                await asyncio.sleep(0.05)
            if not outcome.passive:
                await asyncio.sleep(0.3)  # a second message would show up now
            answers = platform.texts_to(user)[before:]
            outcome.deliveries += len(answers)
            outcome.unable = UNAVAILABLE_TEXT in answers or delivery.reply == UNAVAILABLE_TEXT

    async with httpx.AsyncClient(timeout=None) as client:
        await asyncio.gather(*(user_loop(u, client) for u in range(users)))
    # A message answered again after its user moved on: the API sent more than was counted.
    await asyncio.sleep(2.0)
    for user in {o.user for o in outcomes}:
        mine = [o for o in outcomes if o.user == user]
        counted = sum(o.deliveries - o.passive for o in mine)
        extra = len(platform.texts_to(user)) - counted
        if extra > 0:
            mine[-1].deliveries += extra
    return outcomes


def stored_counts(urls: Sequence[str], outcomes: list[Outcome]) -> tuple[int, int]:
    """Messages whose turn the session holds more than once (the engine answered twice),
    and messages the session does not hold at all."""
    twice = missing = 0
    for user in {o.user for o in outcomes}:
        sent = [o.text for o in outcomes if o.user == user]
        session = session_name("wxmp", APP_ID, user)
        texts: list[str] = []
        for url in urls:
            try:
                reply = httpx.get(f"{url}/sessions/{session}", timeout=5)
            except httpx.HTTPError:
                continue
            if reply.status_code == 200:
                texts = [m["content"] for m in reply.json()["messages"] if m["role"] == "user"]
                break
        twice += len(texts) - len(set(texts))
        missing += sum(text not in texts for text in sent)
    return twice, missing


def summarise(
    scenario: str,
    outcomes: list[Outcome],
    platform: WeChatPlatform,
    wall: float,
    stored: tuple[int, int],
    notes: list[str] | None = None,
) -> Report:
    passive = [o.seconds for o in outcomes if o.passive and o.seconds is not None]
    api = [o.seconds for o in outcomes if not o.passive and o.seconds is not None]
    return Report(
        scenario=scenario,
        messages=len(outcomes),
        passive=len(passive),
        via_api=len(api),
        lost=sum(o.deliveries == 0 for o in outcomes),
        unable=sum(o.unable for o in outcomes),
        duplicates=sum(o.deliveries > 1 for o in outcomes),
        stored_twice=stored[0],
        not_stored=stored[1],
        wechat_errors=sum(o.wechat_error for o in outcomes),
        retries=sum(o.tries - 1 for o in outcomes),
        passive_p50_s=round(percentile(passive, 50), 2),
        passive_p99_s=round(percentile(passive, 99), 2),
        api_p50_s=round(percentile(api, 50), 2),
        api_p99_s=round(percentile(api, 99), 2),
        token_fetches=platform.token_fetches,
        wall_s=round(wall, 1),
        notes=notes or [],
        odd=[
            f"{'lost' if o.deliveries == 0 else 'answered twice'}: {o.user} message {o.turn} "
            f"sent at {o.sent_at - outcomes[0].sent_at:.1f} s: {o.text[:40]!r}"
            for o in outcomes
            if o.deliveries != 1
        ],
    )


def kefu_flags(api: str, key: str, budget: float) -> list[str]:
    return [
        *("--wechat-app-id", APP_ID, "--wechat-app-secret", SECRET, "--wechat-token", TOKEN),
        *("--wechat-aes-key", key, "--wechat-api-base", api),
        *("--wechat-reply-budget", str(budget), "--rate-limit", "off"),
    ]


FAKE = ["--engine", "fake", "--fake-token-delay", "0.15", "--fake-prefill-delay", "0.2"]


async def single(args: argparse.Namespace, kind: str, base: Path) -> Report:
    platform = WeChatPlatform(app_id=APP_ID, secret=SECRET)
    key = aes_key()
    with serve_in_thread(platform.app()) as api:
        engine = (
            ["--max-tokens", "96", "--admission", args.admission]
            if kind == "model"
            else [*FAKE, "--no-fast-path"]
        )
        server = KefuServer(
            base / kind / "data",
            base / kind / "kefu.log",
            [*engine, *kefu_flags(api, key, args.budget), "--parallel", "4"],
        )
        server.data_dir.mkdir(parents=True)
        server.start()
        try:
            account = OfficialAccountSimulator(
                f"{server.url}/wechat/mp",
                token=TOKEN,
                app_id=APP_ID,
                aes_key=key if args.encrypted else None,
                clock=args.clock,
            )
            started = time.perf_counter()
            outcomes = await run_users(
                account, platform, kind=kind, users=args.users, turns=args.turns,
                wait=args.wait, seed=1,
            )  # fmt: skip
            wall = time.perf_counter() - started
            stored = stored_counts([server.url], outcomes)
        finally:
            server.stop()
    name = f"model (SmolLM2-135M), --admission {args.admission}" if kind == "model" else "slow fake"
    return summarise(name, outcomes, platform, wall, stored)


def naive_bridge(kefu: str) -> Starlette:
    """The baseline: wait for /chat inside WeChat's request, reply passively; nothing else."""
    sessions: dict[str, str] = {}

    async def handle(request: Request) -> Response:
        fields = xmltodict.parse(await request.body())["xml"]
        user, account = fields["FromUserName"], fields["ToUserName"]
        body: dict[str, Any] = {"message": fields.get("Content") or ""}
        if user in sessions:
            body["session_id"] = sessions[user]
        reply = ""
        async with (
            httpx.AsyncClient(timeout=None) as client,
            client.stream("POST", f"{kefu}/chat", json=body) as stream,
        ):
            if stream.status_code != 200:
                return Response("busy", status_code=503)
            async for line in stream.aiter_lines():
                if line.startswith("data: ") and '"reply"' in line:
                    done = json.loads(line[6:])
                    sessions[user] = done["session_id"]
                    reply = done["reply"]
        xml = xmltodict.unparse(
            {
                "xml": {
                    "ToUserName": user,
                    "FromUserName": account,
                    "CreateTime": str(int(time.time())),
                    "MsgType": "text",
                    "Content": reply,
                }
            },
            full_document=False,
        )
        return Response(xml, media_type="application/xml")

    return Starlette(routes=[Route("/wechat", handle, methods=["POST"])])


async def naive(args: argparse.Namespace, base: Path) -> Report:
    platform = WeChatPlatform(app_id=APP_ID, secret=SECRET)
    server = KefuServer(
        base / "naive" / "data", base / "naive" / "kefu.log", [*FAKE, "--no-fast-path"]
    )
    server.data_dir.mkdir(parents=True)
    server.start()
    try:
        with serve_in_thread(naive_bridge(server.url)) as bridge:
            account = OfficialAccountSimulator(
                f"{bridge}/wechat", token=TOKEN, app_id=APP_ID, clock=args.clock
            )
            started = time.perf_counter()
            outcomes = await run_users(
                account, platform, kind="fake", users=args.users, turns=args.turns,
                wait=1.0, seed=1,
            )  # fmt: skip
            wall = time.perf_counter() - started
        # The bridge's sessions are kefu's own: count the turns the engine made per message.
        turns = await asyncio.to_thread(metric_sum, server.url, "kefu_answers_total")
    finally:
        server.stop()
    note = f"the engine answered {turns:.0f} times for {len(outcomes)} messages"
    return summarise("naive bridge (baseline)", outcomes, platform, wall, (-1, -1), [note])


async def replicas(args: argparse.Namespace, base: Path) -> Report:
    platform = WeChatPlatform(app_id=APP_ID, secret=SECRET, expires_in=int(args.token_life))
    key = aes_key()
    notes: list[str] = []
    with (
        running_redis(base / "redis") as redis,
        serve_in_thread(platform.app()) as api,
    ):
        servers = [
            KefuServer(
                base / f"replica{i}" / "data",
                base / f"replica{i}" / "kefu.log",
                [*FAKE, "--no-fast-path", "--redis", redis.url, *kefu_flags(api, key, args.budget)],
            )
            for i in range(2)
        ]
        for server in servers:
            server.data_dir.mkdir(parents=True)
            server.start()
        total = args.users * args.turns
        killed_at: list[float] = []

        def kill_a_third_in(n: int) -> None:
            if n == total // 3 and not killed_at:
                killed_at.append(time.perf_counter())
                asyncio.get_running_loop().call_later(0.8, servers[0].send_signal, signal.SIGKILL)

        try:
            account = OfficialAccountSimulator(
                [f"{s.url}/wechat/mp" for s in servers], token=TOKEN, app_id=APP_ID,
                aes_key=key if args.encrypted else None, clock=args.clock,
            )  # fmt: skip
            started = time.perf_counter()
            outcomes = await run_users(
                account, platform, kind="fake", users=args.users, turns=args.turns,
                wait=args.wait, seed=2, route=lambda u, t: u + t, on_turn=kill_a_third_in,
            )  # fmt: skip
            wall = time.perf_counter() - started
            takeovers = await asyncio.to_thread(
                metric_sum, servers[1].url, "kefu_wechat_takeovers_total"
            )
            stored = stored_counts([servers[1].url], outcomes)
        finally:
            for server in servers:
                server.stop()
    refreshes = max(1, int(wall // (args.token_life / 2)) + 1)
    notes.append(
        f"replica 0 killed {killed_at[0] - started + 0.8:.1f} s in; replica 1 took over "
        f"{takeovers:.0f} messages"
        if killed_at
        else "no kill (too few messages)"
    )
    notes.append(
        f"tokens living {args.token_life:g} s are refreshed at half life: at most {refreshes} "
        f"fetches in {wall:.0f} s for all replicas together"
    )
    return summarise("two replicas, one killed", outcomes, platform, wall, stored, notes)


def keep_logs(base: Path, into: Path) -> None:
    into.mkdir(parents=True, exist_ok=True)
    for log in base.rglob("kefu.log"):
        shutil.copy(log, into / f"{log.parent.name}.log")


def table(reports: list[Report]) -> str:
    head = (
        "| scenario | messages | passive | via API | time passive p50/p99 | time via API p50/p99 "
        "| WeChat error | retries | duplicates | stored twice / not stored | lost "
        "| could not answer | token fetches |"
    )
    rows = [head, "|" + "---|" * 13]
    for r in reports:
        share = f"{r.passive} ({100 * r.passive / max(1, r.messages):.0f} %)"
        rows.append(
            f"| {r.scenario} | {r.messages} | {share} | {r.via_api} "
            f"| {r.passive_p50_s} / {r.passive_p99_s} s | {r.api_p50_s} / {r.api_p99_s} s "
            f"| {r.wechat_errors} | {r.retries} | {r.duplicates} "
            f"| {'n/a' if r.stored_twice < 0 else f'{r.stored_twice} / {r.not_stored}'} "
            f"| {r.lost} | {r.unable} "
            f"| {r.token_fetches} |"
        )
    return "\n".join(rows)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=6)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--budget", type=float, default=4.0, help="--wechat-reply-budget")
    parser.add_argument("--clock", type=float, default=5.0, help="WeChat's wait per try")
    parser.add_argument(
        "--wait",
        type=float,
        default=300.0,
        help="seconds before 'lost': past the channel's patience with a busy engine "
        f"({PATIENCE_SECONDS:g} s), its queue's timeout and the answer itself",
    )
    parser.add_argument("--admission", choices=["predicted", "queue"], default="predicted")
    parser.add_argument("--token-life", type=float, default=20.0)
    parser.add_argument("--encrypted", action="store_true", help="安全模式 (AES)")
    parser.add_argument("--skip-model", action="store_true")
    parser.add_argument("--only", choices=["model", "fake", "naive", "replicas"])
    parser.add_argument("--json", type=Path)
    parser.add_argument("--logs", type=Path, help="keep each kefu's log in this directory")
    args = parser.parse_args()
    reports: list[Report] = []
    with tempfile.TemporaryDirectory(prefix="kefu-wechat-") as tmp:
        base = Path(tmp)
        plan = ["model", "fake", "naive", "replicas"]
        if args.skip_model:
            plan.remove("model")
        if args.only:
            plan = [args.only]
        for scenario in plan:
            if scenario in ("model", "fake"):
                report = await single(args, scenario, base)
            elif scenario == "naive":
                report = await naive(args, base)
            else:
                report = await replicas(args, base)
            reports.append(report)
            if args.logs:
                keep_logs(base, args.logs)
            print(table([report]).splitlines()[-1], *report.notes, sep="\n  ", flush=True)
            for line in report.odd:
                print(f"  {line}", flush=True)
    print()
    print(
        f"{args.users} users x {args.turns} messages each, WeChat's clock {args.clock:g} s x "
        f"3 tries, reply budget {args.budget:g} s{', 安全模式' if args.encrypted else ''}"
    )
    print(table(reports))
    for report in reports:
        for note in report.notes:
            print(f"- {report.scenario}: {note}")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in reports], indent=2))


if __name__ == "__main__":
    asyncio.run(main())
