"""The judge checked before its verdicts are used, end to end: a shop's FAQ imported,
``kefu serve --judge-with-engine`` on the bundled model, and in the first refresh round
the judge answers the knowledge base's known questions. The bundled SmolLM2-135M cannot
tell an answer that answers from one that does not (wrong on 82 of 100 in
``benchmarks/faq_replay.py --judges smollm``), so its verdicts are never used."""

from __future__ import annotations

import csv
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from tests.e2e.conftest import CHAT_MAX_TOKENS
from tests.e2e.support import KefuServer, chat_stream, wait_for

pytestmark = pytest.mark.e2e

FAQ = [
    ("How long does delivery take?", "Parcels arrive in 2 to 4 working days."),
    ("Can I return a bike?", "Unridden bikes can be returned within 30 days."),
    ("Do you repair wheels?", "Our workshop trues and repairs wheels from 15 euros."),
    ("Where is the shop?", "We are at 12 Harbour Street, open Monday to Saturday."),
    ("Do you sell gift cards?", "Gift cards from 20 to 500 euros, by e-mail or in the shop."),
]


@pytest.fixture(scope="module")
def judged_shop(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KefuServer]:
    base = tmp_path_factory.mktemp("judge")
    faq = base / "faq.csv"
    with faq.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["question", "answer"])
        writer.writerows(FAQ)
    data = base / "data"
    command = [sys.executable, "-m", "kefu", "kb", "import", str(faq), "--data-dir", str(data)]
    imported = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert imported.returncode == 0, imported.stderr
    args = ("--no-demo", "--judge-with-engine", "--max-tokens", str(CHAT_MAX_TOKENS))
    server = KefuServer(data, base / "kefu.log", args)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def judge_state(server: KefuServer) -> dict[str, Any]:
    judge = server.ready_state()["knowledge_base"]["judge"]
    assert isinstance(judge, dict)
    return judge


def test_a_judge_wrong_on_the_known_questions_is_not_used(judged_shop: KefuServer) -> None:
    # The first refresh round after the start asks the judge the known questions.
    wait_for(lambda: judge_state(judged_shop)["checked"], "the judge's check", timeout=180)
    checked = judge_state(judged_shop)["checked"]
    # Each question with its answer and with another's; it stops once a quarter of all
    # of them are wrong.
    assert checked["asked"] <= 2 * len(FAQ)
    assert checked["wrong"] >= 0.25 * 2 * len(FAQ)
    assert checked["used"] is False
    assert "its verdicts are not used" in judged_shop.log_tail(200)
    assert judge_state(judged_shop)["asked"] == checked["asked"]  # the check alone
    # The engine it shares with the customers still answers them.
    with httpx.Client(base_url=judged_shop.url, timeout=120) as http:
        frames = chat_stream(http, "can you recommend a bike for a long tour?")
    assert frames[-1].json()["tier"] == "llm"
