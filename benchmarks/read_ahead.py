"""The first model turn after turns the fast path answered, with and without reading the
conversation ahead (``--read-ahead``, the default, against ``--no-read-ahead``).

Each arm is a fresh ``kefu serve`` (bundled model, the demo shop, ``--max-tokens`` short
so a run holds many conversations; the flag under test). One customer at a time opens a
conversation with ``--faq-turns`` of the demo shop's own questions (the fast path answers
them and the engine sees none; one it declines is left out of the conversation), reads
each answer for ``--think`` seconds, then asks what only the model answers (a kettle with
a cracked lid: not in the shop's knowledge base). Per arm: that model turn's first-token
time (p50, p90) and the share of its prompt the engine reused from its KV
(``cached_prompt_tokens``), which the read ahead is for. Arms alternate ``--repeat``
times; the ratio is of the pooled TTFT p50.

    ../.venv/bin/python read_ahead.py --conversations 12 --faq-turns 1,2,3 --repeat 2
"""

from __future__ import annotations

import argparse
import asyncio

import httpx

from harness import kefu_server, percentile, summary
from kefu import demo
from long_conversation import TurnResult as Turn
from long_conversation import chat_turn as turn

ARMS = {"read ahead": ("--read-ahead",), "no read ahead": ("--no-read-ahead",)}
# Only the model answers these: the demo shop's knowledge base has nothing on them.
MODEL_QUESTIONS = (
    "Hi, my order arrived with a cracked lid on the kettle, what can I do about it?",
    "The base of my kettle makes a clicking noise, should I stop using it?",
    "Could you explain how to descale a kettle without damaging it?",
    "My neighbour will take the parcel, can the courier leave it with him?",
)


async def arm(url: str, args: argparse.Namespace, faq: list[str]) -> list[Turn]:
    """The model turns of ``--conversations`` conversations, one after another."""
    model_turns = []
    async with httpx.AsyncClient(timeout=300) as client:
        asked = iter(faq)
        for number in range(args.conversations):
            session_id = None
            for _ in range(args.faq_turns[number % len(args.faq_turns)]):
                while True:  # a question the fast path declines is not one for this
                    question = next(asked)
                    new_id, answered, _ = await turn(client, url, question, session_id)
                    await asyncio.sleep(args.think)  # the customer reads the answer
                    if answered.tier != "llm":
                        session_id = new_id
                        break
            question = MODEL_QUESTIONS[number % len(MODEL_QUESTIONS)]
            _, answered, _ = await turn(client, url, question, session_id)
            if answered.tier != "llm":
                raise RuntimeError(f"the fast path answered {question!r}")
            model_turns.append(answered)
            await asyncio.sleep(args.think)  # the next customer comes to an idle engine
    return model_turns


def row(name: str, turns: list[Turn]) -> str:
    ttfts = [t.ttft for t in turns]
    prompt = sum(t.prompt_tokens for t in turns)
    cached = sum(t.cached_tokens for t in turns)
    p50, p90 = percentile(ttfts, 50), percentile(ttfts, 90)
    return (
        f"{name:14} {len(turns):5} {'-' if p50 is None else round(p50 * 1000):>7} "
        f"{'-' if p90 is None else round(p90 * 1000):>7} "
        f"{cached / prompt if prompt else 0:7.1%} {prompt / max(1, len(turns)):7.0f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=summary(__doc__))
    parser.add_argument("--conversations", type=int, default=12, help="per arm and repeat")
    parser.add_argument(
        "--faq-turns",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[1, 2, 3],
        help="fast-path turns before the model turn, cycled",
    )
    parser.add_argument("--think", type=float, default=3.0, help="seconds between turns")
    parser.add_argument("--max-tokens", type=int, default=48, help="the server's reply cap")
    parser.add_argument("--repeat", type=int, default=1, help="pairs of arms")
    args = parser.parse_args()
    faq = [e.question for e in demo.entries() if e.lang == "en" and e.kind != "passage"]
    print(
        f"fresh kefu serve per arm, bundled model, --max-tokens {args.max_tokens}; "
        f"{args.conversations} conversations an arm: {args.faq_turns} fast-path turns, "
        f"{args.think:g} s, a model turn; times in ms\n"
    )
    print(f"{'server':14} {'turns':>5} {'ttft50':>7} {'ttft90':>7} {'reused':>7} {'prompt':>7}")
    pooled: dict[str, list[Turn]] = {name: [] for name in ARMS}
    for _ in range(args.repeat):
        for name, flags in ARMS.items():
            with kefu_server(*flags, "--max-tokens", str(args.max_tokens)) as url:
                turns = asyncio.run(arm(url, args, faq))
            pooled[name] += turns
            print(row(name, turns), flush=True)
    print("\npooled")
    for name, turns in pooled.items():
        print(row(name, turns))
    on = percentile([t.ttft for t in pooled["read ahead"]], 50)
    off = percentile([t.ttft for t in pooled["no read ahead"]], 50)
    if on is not None and off:
        print(
            f"model turn after fast-path turns: TTFT p50 with / without read ahead {on / off:.2f}x"
        )


if __name__ == "__main__":
    main()
