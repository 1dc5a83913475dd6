"""The FAQ decision fitted to a knowledge base's labels with the real looks (the word
table, BM25, multilingual-e5-small) on a small knowledge base that is not the demo: in
the background after a change, stored beside the knowledge base, what it stands on in
``/ready``'s block, the reviews and the judge's verdicts as labels."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from kefu.cli import main
from kefu.engine.base import GenerationRequest
from kefu.engine.fake import FakeEngine
from kefu.faq.labels import LABELS_FILE, LabelLog
from kefu.faq.model import MODEL_FILE, NEVER, Curve, Model, Point, load_prior
from kefu.knowledge.entries import KbEntry, answer_key
from kefu.knowledge.misses import MISSES_FILE, MissLog
from kefu.service.fast_path import FastPath
from kefu.service.judging import Judge
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
    fast_path = await opened(settings_factory(fast_path=True, demo=False))
    try:
        await fast_path.import_entries([KbEntry.make(q, a, category="gym") for q, a in FAQ])
        yield fast_path
    finally:
        await fast_path.close()


async def fitted(fast_path: FastPath) -> None:
    """Refresh rounds, as the server runs them, until the background fit is done."""
    for _ in range(600):
        await fast_path.refresh()
        await fast_path.keeper.settled()
        if not fast_path.keeper.stale and fast_path.keeper.status()["state"] == "fitted":
            return
        await asyncio.sleep(0.05)
    raise AssertionError("not fitted")


def pin(fast_path: FastPath, threshold: float) -> None:
    target = fast_path.settings.faq_precision
    point = Point(threshold, "labels", 100, 100, 0.97)
    fast_path.keeper.model = Model("", target, point, Curve(()))
    fast_path.keeper.stale = False


@pytest.mark.anyio
async def test_a_change_is_fitted_in_the_background_and_stored(gym: FastPath) -> None:
    # Before any fit, the shipped prior decides, at its conservative threshold.
    assert gym.keeper.status()["decided_by"] in ("prior", "none")
    assert gym.keeper.stale
    await fitted(gym)
    model = gym.keeper.model
    # One question per answer: no phrasing to hold out, no label: the prior decides.
    assert model.labels == {}
    assert model.point.source in ("prior", "none")
    stored = json.loads((gym.settings.data_dir / MODEL_FILE).read_text(encoding="utf-8"))
    assert stored["fingerprint"] == model.fingerprint
    status = gym.keeper.status()
    assert status["target_precision"] == 0.95
    assert status["labels"] == {}
    assert status["labelled_candidates"] == 0

    # A reviewer accepts a declined message as a question of the entry that answers it,
    # and rejects one nothing answers: a phrasing label, and a review label.
    for message in (
        "my card expired, how do i put the new one in",
        "how do i cancel my netflix membership",
    ):
        assert (await gym.plan(message, scope="t", failures=0)).tier == "llm"
    await gym.refresh()  # writes the misses
    data = str(gym.settings.data_dir)
    log = MissLog(gym.settings.data_dir / MISSES_FILE)
    misses = {m.message: m.id for m in log.top()}
    log.close()
    card = KbEntry.make(*FAQ[9])
    accept = ["kb", "misses", "--data-dir", data, "accept"]
    assert (
        main([*accept, str(misses["my card expired, how do i put the new one in"]), card.id]) == 0
    )
    reject = ["kb", "misses", "--data-dir", data, "reject"]
    assert main([*reject, str(misses["how do i cancel my netflix membership"])]) == 0
    await gym.refresh()  # picks the change up, as the server does every 2 s
    await fitted(gym)
    learnt = gym.keeper.model
    assert learnt.fingerprint != model.fingerprint
    assert learnt.labels == {"phrasing": 2, "review": 1}


@pytest.mark.anyio
async def test_verdicts_from_traffic_are_labels_and_lower_the_threshold(gym: FastPath) -> None:
    await fitted(gym)
    assert gym.keeper.model.point.source != "labels"
    hours = KbEntry.make(*FAQ[0])
    said = [
        "what time does the gym open",
        "when do you open in the morning",
        "gym opening times",
        "how late are you open",
        "opening hours?",
        "is the gym open at 7am",
    ]
    # A judge's yes on six wordings of one answer, again and again, as traffic brings
    # them: the labels' bound reaches the promise, and the answer is served.
    for _ in range(12):
        for message in said:
            await gym.record_verdict(message, answer_key(hours.answer), True)
    log = LabelLog(gym.settings.data_dir / LABELS_FILE)
    assert log.revision() == 72
    log.close()
    await fitted(gym)
    model = gym.keeper.model
    assert model.labels["judge"] == 72
    assert model.point.source == "labels"
    assert model.point.bound >= 0.95
    plan = await gym.plan("what time does the gym open", scope="t", failures=0)
    assert (plan.tier, plan.reply) == ("faq", hours.answer)


class FakeStrictJudge(FakeEngine):
    """A fake judge: yes only when the customer's message is the FAQ question itself
    (right on every known question of a knowledge base with one question an answer);
    ``always`` replies that word whatever it is asked."""

    def __init__(self, always: str | None = None) -> None:
        super().__init__()
        self.always = always

    def reply_for(self, request: GenerationRequest) -> list[str]:
        if self.always is not None:
            return [self.always]
        asked = request.messages[-1].content.splitlines()
        lines = dict(line.split(": ", 1) for line in asked if ": " in line)
        return ["yes" if lines["Customer's message"] == lines["FAQ question"] else "no"]


async def judged_after(gym: FastPath, message: str) -> None:
    """A declined message through a turn's end, the judge's tasks awaited."""
    plan = await gym.plan(message, scope="t", failures=0)
    assert plan.tier == "llm"
    assert plan.declined  # the looks' candidates
    tasks: list[asyncio.Task[None]] = []
    gym.after_reply(message, plan, lambda c: tasks.append(asyncio.ensure_future(c)))
    while tasks:
        await tasks.pop()


@pytest.mark.anyio
async def test_the_judge_answers_known_questions_before_its_verdicts_are_labels(
    gym: FastPath,
) -> None:
    engine = FakeStrictJudge()
    gym.judge = Judge(engine, gym.record_verdict, start=True, seed=1)
    assert await gym.follow_second_look() == 0
    pin(gym, 0.99)
    message = "my card expired, how do i put the new one in"
    await judged_after(gym, message)  # not checked yet: nothing is judged
    assert gym.judge.asked == 0
    assert gym.judge.may_check()
    await gym.check_judge(gym.judge)
    assert gym.judge.reliability is not None
    assert (gym.judge.reliability.asked, gym.judge.reliability.wrong) == (20, 0)
    assert engine.requests[0].sampling.temperature == 0.0
    assert "Stored answer:" in engine.requests[0].messages[-1].content
    log = LabelLog(gym.settings.data_dir / LABELS_FILE)
    assert log.revision() == 0
    assert gym.keeper.stale  # refitted with the judge's error taken out
    assert gym.keeper.judge_error == 0.0  # none seen, none taken out
    pin(gym, 0.99)
    await judged_after(gym, message)
    assert log.revision() >= 1  # the candidates the LLM read, each a "no"
    log.close()
    assert gym.judge.status()["checked"] == {
        "asked": 20,
        "wrong": 0,
        "error_taken_out": 0.0,
        "used": True,
    }


@pytest.mark.anyio
@pytest.mark.parametrize("says", ["yes", "fake reply"])
async def test_a_judge_wrong_on_known_questions_is_not_used(gym: FastPath, says: str) -> None:
    gym.judge = Judge(FakeStrictJudge(always=says), gym.record_verdict, start=True, seed=1)
    assert await gym.follow_second_look() == 0
    pin(gym, 0.99)
    await gym.refresh()  # a refresh round starts the check
    assert gym._judge_check is not None
    await gym._judge_check
    assert not gym.judge.may_check()  # once
    await judged_after(gym, "my card expired, how do i put the new one in")
    reliability = gym.judge.reliability
    assert reliability is not None
    assert reliability.useless
    # Always yes is wrong on every other answer, an unclear reply on all of them: the
    # check stops once a quarter of its 20 questions are wrong.
    assert (reliability.asked, reliability.wrong) == ((10, 5) if says == "yes" else (5, 5))
    assert gym.judge.asked == reliability.asked  # the check alone: nothing of traffic
    log = LabelLog(gym.settings.data_dir / LABELS_FILE)
    assert log.revision() == 0
    log.close()


@pytest.mark.anyio
async def test_an_answer_with_one_question_is_left_to_the_second_look(
    settings_factory: Callable[..., Settings],
) -> None:
    fast_path = await opened(settings_factory(fast_path=True, demo=False, second_look=False))
    try:
        entries = [KbEntry.make(q, a, category="gym") for q, a in FAQ]
        entries.append(KbEntry.make("When does the gym open?", FAQ[0][1], category="gym"))
        await fast_path.import_entries(entries)
        pin(fast_path, 0.5)
        # Without the second look nothing serves an answer with one question: the words
        # alone cannot tell "is there a pool *table*?" from "is there a pool?".
        lockers = await fast_path.plan("do you have any lockers please", scope="t", failures=0)
        assert lockers.tier == "llm"
        assert lockers.routing.reason == "first look: no answer with several questions leads"
        # An answer with two questions is the first look's to serve.
        hours = await fast_path.plan("when does the gym open please", scope="t", failures=0)
        assert (hours.tier, hours.reply) == ("faq", FAQ[0][1])
    finally:
        await fast_path.close()


@pytest.mark.anyio
async def test_a_question_in_another_language_gets_the_entry_as_a_passage(gym: FastPath) -> None:
    assert await gym.follow_second_look() == 0
    pin(gym, 0.0)  # serve anything in the message's language
    plan = await gym.plan("健身房有游泳池吗？", scope="t", failures=0)
    assert plan.tier == "llm"  # the answer is English: the LLM answers in Chinese
    assert plan.passages
    assert plan.passages[0].entry.question == "Is there a swimming pool?"


def test_where_labels_are_few_the_prior_decides_and_where_many_say_no_nothing_serves() -> None:
    prior = dataclasses.replace(load_prior(), fallback={"0.95": 0.9})
    few = Model.fitted("", 0.95, [0.99] * 20, [True] * 20, {}, prior)
    assert (few.point.source, few.point.threshold) == ("prior", 0.9)
    # Many labels, and wrong ones at every threshold: nothing is served.
    many = Model.fitted("", 0.95, [0.99] * 200, [i % 4 != 0 for i in range(200)], {}, prior)
    assert (many.point.source, many.point.threshold) == ("none", NEVER)
    # Enough right ones of the knowledge base's own: they cannot bring the prior's
    # threshold down by themselves.
    own = Model.fitted("", 0.95, [0.8] * 100, [True] * 100, {}, prior)
    assert (own.point.source, own.point.threshold) == ("prior", 0.9)
    # From traffic, they can: the labels' own threshold, with its bound.
    good = Model.fitted("", 0.95, [0.8] * 100, [True] * 100, {}, prior, traffic=[True] * 100)
    assert (good.point.source, good.point.threshold) == ("labels", 0.8)
    assert good.point.bound == pytest.approx(0.05 ** (1 / 100))


def test_kb_calibrate_prints_what_serves_and_kb_stats_shows_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    faq = tmp_path / "gym.csv"
    rows = [*FAQ, ("When does the gym open?", FAQ[0][1]), ("Can I park my car?", FAQ[8][1])]
    faq.write_text(
        "question,answer\n" + "".join(f'"{q}","{a}"\n' for q, a in rows), encoding="utf-8"
    )
    data = str(tmp_path / "data")
    assert main(["kb", "import", "--data-dir", data, str(faq)]) == 0
    assert main(["kb", "stats", "--data-dir", data]) == 0
    assert "decision: the prior's" in capsys.readouterr().out
    assert main(["kb", "calibrate", "--data-dir", data, "--faq-precision", "0.9"]) == 0
    out, err = capsys.readouterr()
    assert "serves at --faq-precision 0.90 where P(right) >= " in out
    assert "labels: phrasing 4" in out
    assert "threshold at other promises:" in out
    assert "calibrating [" in err  # the progress bar
    assert main(["kb", "stats", "--data-dir", data, "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["faq_answers"] == 10
    assert stats["decision"]["current"] is True
    assert stats["decision"]["target_precision"] == 0.9
    assert stats["decision"]["labels"] == {"phrasing": 4}
    assert main(["kb", "calibrate", "--data-dir", data, "--faq-precision", "1.5"]) == 2


@pytest.mark.anyio
async def test_a_judge_is_checked_again_once_the_knowledge_base_has_answers(
    settings_factory: Callable[..., Settings],
) -> None:
    fast_path = await opened(settings_factory(fast_path=True, demo=False))
    try:
        fast_path.judge = Judge(FakeStrictJudge(), fast_path.record_verdict, start=True)
        await fast_path.check_judge(fast_path.judge)  # nothing to ask yet
        assert fast_path.judge.reliability is None
        assert not fast_path.judge.may_check()  # not at once: after CHECK_RETRY_S
        await fast_path.import_entries([KbEntry.make(q, a) for q, a in FAQ[:3]])
        fast_path.judge._check_at = 0.0  # the retry's time has come
        assert fast_path.judge.may_check()
        await fast_path.check_judge(fast_path.judge)
        reliability = fast_path.judge.reliability
        assert reliability is not None
        assert (reliability.asked, reliability.wrong) == (6, 0)
        assert fast_path.judge.judging_traffic
    finally:
        await fast_path.close()
