"""The calibrated decision with the real looks (the word table, BM25, multilingual-e5-
small) on a small knowledge base that is not the demo: fitted in the background after a
change, stored beside the knowledge base, applied to a message, crossing languages."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kefu.calibration.model import CALIBRATION_FILE
from kefu.calibration.probes import fingerprint
from kefu.cli import main
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.service.fast_path import FastPath
from kefu.settings import Settings
from tests.unit.fast_path_support import opened

FAQ = [
    ("What are the opening hours of the gym?", "We are open 6am to 10pm every day."),
    ("How do I cancel my membership?", "Cancel in the app under Membership, one month notice."),
    ("Can I bring a guest?", "Members may bring one guest a month for free."),
    ("Is there a swimming pool?", "Yes, a 25 m pool, open until 9pm."),
    ("How much is a personal trainer?", "Personal training costs 40 euros an hour."),
    ("Do you have lockers?", "Lockers are free; bring your own padlock."),
    ("Can I freeze my membership?", "You can freeze it for up to three months a year."),
    ("Are there group classes?", "Yoga, spinning and boxing classes run daily."),
    ("Is there parking?", "Free parking for two hours behind the building."),
    ("How do I update my payment card?", "Change your card in the app under Payments."),
]


@pytest.fixture
async def gym(settings_factory: Callable[..., Settings]) -> AsyncIterator[FastPath]:
    fast_path = await opened(settings_factory(fast_path=True, demo_kb=False))
    try:
        await fast_path.import_entries([KbEntry.make(q, a, category="gym") for q, a in FAQ])
        yield fast_path
    finally:
        await fast_path.close()


async def calibrated(fast_path: FastPath) -> None:
    """Refresh rounds, as the server runs them, until the background fit is done."""
    for _ in range(600):
        await fast_path.refresh()
        if not fast_path.keeper.stale and fast_path.keeper.status(True)["state"] == "calibrated":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("no calibration")


@pytest.mark.anyio
async def test_a_change_is_calibrated_in_the_background_and_stored(gym: FastPath) -> None:
    assert gym.keeper.stale
    assert gym.keeper.status(True)["state"] == "calibrating"
    await calibrated(gym)
    calibration = gym.keeper.calibration
    assert calibration is not None
    entries = await gym.read_kb(lambda kb: kb.entries())
    assert calibration.fingerprint == fingerprint(entries)
    assert calibration.target == 0.95
    # Served where the shipped prior's P(right) reaches the target; the probes measure it.
    assert (calibration.point.first, calibration.point.second) == (0.95, 0.95)
    assert calibration.point.coverage > 0.3
    assert calibration.elsewhere["precision"] >= 0.9  # customers' wording, other KBs
    stored = json.loads((gym.settings.data_dir / CALIBRATION_FILE).read_text(encoding="utf-8"))
    assert stored["fingerprint"] == calibration.fingerprint
    status = gym.keeper.status(True)
    assert status["target_precision"] == 0.95
    assert status["expected_precision"] == round(calibration.point.precision, 4)
    assert status["measured_elsewhere"] == calibration.elsewhere

    served = await gym.plan("what time does the gym open", scope="t", failures=0)
    assert served.tier == "faq"
    assert served.reply == FAQ[0][1]
    for message in ("what's the weather like tomorrow?", "can I pay my phone bill here?"):
        declined = await gym.plan(message, scope="t", failures=0)
        assert declined.tier == "llm", message
    # Not asserted: "how do I cancel my netflix account", a near miss, gets the
    # membership's answer here (the second look's lead over the next answer is wide
    # among ten answers, wider than on the 45-60 the prior was fitted on; it served 4
    # of 54 near misses there, docs/ARCHITECTURE.md).

    # Learning from traffic: a reviewer accepts a declined message (written by the
    # server's miss log) as a question of the entry that answers it, with the CLI.
    message = "my card expired, how do i put the new one in"
    assert (await gym.plan(message, scope="t", failures=0)).tier == "llm"
    await gym.refresh()  # writes the miss
    data = str(gym.settings.data_dir)
    log = MissLog(gym.settings.data_dir / MISSES_FILE)
    [miss] = [m for m in log.top() if m.message == message]
    log.close()
    card = KbEntry.make(*FAQ[9])
    assert main(["kb", "misses", "--data-dir", data, "accept", str(miss.id), card.id]) == 0
    await gym.refresh()  # picks the change up, as the server does every 2 s
    assert gym.keeper.stale  # the change: fitted again in the next rounds
    await calibrated(gym)
    learnt = gym.keeper.calibration
    assert learnt is not None
    assert learnt.fingerprint != calibration.fingerprint
    assert learnt.probes["phrasing"] == 2  # the customer's wording, held out, is a probe
    again = await gym.plan(message, scope="t", failures=0)
    assert (again.tier, again.reply) == ("faq", FAQ[9][1])


@pytest.mark.anyio
async def test_an_answer_with_one_question_is_left_to_the_second_look(
    settings_factory: Callable[..., Settings],
) -> None:
    fast_path = await opened(settings_factory(fast_path=True, demo_kb=False, second_look=False))
    try:
        entries = [KbEntry.make(q, a, category="gym") for q, a in FAQ]
        entries.append(KbEntry.make("When does the gym open?", FAQ[0][1], category="gym"))
        await fast_path.import_entries(entries)
        await calibrated(fast_path)
        # Without the second look nothing serves an answer with one question: the words
        # alone cannot tell "is there a pool *table*?" from "is there a pool?".
        lockers = await fast_path.plan("do you have any lockers please", scope="t", failures=0)
        assert lockers.tier == "llm"
        assert lockers.routing.reason is not None
        assert "the answer has one question" in lockers.routing.reason
        # An answer with two questions is the first look's to serve.
        hours = await fast_path.plan("when does the gym open please", scope="t", failures=0)
        assert (hours.tier, hours.reply) == ("faq", FAQ[0][1])
    finally:
        await fast_path.close()


@pytest.mark.anyio
async def test_a_question_in_another_language_gets_the_entry_as_a_passage(gym: FastPath) -> None:
    await calibrated(gym)
    plan = await gym.plan("健身房有游泳池吗？", scope="t", failures=0)
    assert plan.tier == "llm"  # the answer is English: the LLM answers in Chinese
    assert plan.passages
    assert plan.passages[0].entry.question == "Is there a swimming pool?"


def test_kb_calibrate_prints_the_curve_and_kb_stats_the_operating_point(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faq = tmp_path / "gym.csv"
    faq.write_text(
        "question,answer\n" + "".join(f'"{q}","{a}"\n' for q, a in FAQ), encoding="utf-8"
    )
    data = str(tmp_path / "data")
    assert main(["kb", "import", "--data-dir", data, str(faq)]) == 0
    assert main(["kb", "stats", "--data-dir", data]) == 0
    assert "calibration: none yet" in capsys.readouterr().out
    assert main(["kb", "calibrate", "--data-dir", data, "--faq-precision", "0.9"]) == 0
    out, err = capsys.readouterr()
    assert "operating point at --faq-precision 0.90: served where the prior's P(right)" in out
    assert "on customers' wording of knowledge bases the prior was not fitted on" in out
    assert "expected curve (probes):" in out
    assert "calibrating [" in err  # the progress bar
    assert main(["kb", "stats", "--data-dir", data, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["faq_answers"] == 10
    assert stats["calibration"]["current"] is True
    assert stats["calibration"]["target_precision"] == 0.9
    assert main(["kb", "calibrate", "--data-dir", data, "--faq-precision", "1.5"]) == 2
