"""The probes the decision is calibrated on, made from the entries alone."""

from __future__ import annotations

import random
from collections import Counter

from kefu.calibration.probes import (
    fingerprint,
    first_sentence,
    make_probes,
    mixtures,
    rewordings,
    swap_subject,
)
from kefu.knowledge.entries import KbEntry, answer_key

ENTRIES = [
    KbEntry.make("How do I reset my password?", "Use the link on the sign-in page."),
    KbEntry.make("I forgot my password", "Use the link on the sign-in page."),
    KbEntry.make("How much does the premium plan cost?", "Premium is $10 a month."),
    KbEntry.make("Can I pay by invoice?", "Yes, on the annual plan."),
    KbEntry.make("怎么修改绑定的手机号？", "在账户设置里修改手机号。"),
]


def test_every_kind_of_probe_is_made_and_the_same_each_time() -> None:
    probes = make_probes(ENTRIES)
    kinds = Counter(probe.kind for probe in probes)
    assert kinds["phrasing"] == 2  # only the password answer has two questions
    assert kinds["removed"] == 4  # one per answer
    assert kinds["reworded"] > 0
    assert kinds["perturbed"] > 0
    assert kinds["out_of_scope"] > 100
    assert probes == make_probes(list(reversed(ENTRIES)))


def test_a_held_out_probe_leaves_its_own_entries_out() -> None:
    password = answer_key(ENTRIES[0].answer)
    for probe in make_probes(ENTRIES):
        if probe.kind == "phrasing":
            assert probe.answer == password
            assert probe.excluded == {KbEntry.make(probe.text, "x").id}
        elif probe.kind == "removed":
            assert probe.answer is None
            left_out = [e for e in ENTRIES if e.id in probe.excluded]
            assert {answer_key(e.answer) for e in left_out} == {answer_key(left_out[0].answer)}
            assert len(left_out) == sum(e.answer == left_out[0].answer for e in ENTRIES)
        elif probe.kind in ("perturbed", "out_of_scope"):
            assert probe.answer is None


def test_a_question_reworded_as_customers_type_it() -> None:
    cut, typed, aside = rewordings("How much does the premium plan cost?", random.Random(0))
    assert cut == "much premium plan cost"
    assert typed != "how much does the premium plan cost"
    assert len(typed) == 35
    assert aside.endswith("how much does the premium plan cost?")
    assert rewordings("怎么修改绑定的手机号？", random.Random(0))[0] == "修改绑定手机号"


def test_a_swap_changes_what_the_question_is_about() -> None:
    swapped = swap_subject("How much does the premium plan cost?", "Can I pay by invoice?")
    assert swapped == "How much does the invoice plan cost?"
    assert swap_subject("Can I pay?", "Can I pay?") is None


def test_a_place_the_knowledge_base_names_is_no_near_miss() -> None:
    airport = KbEntry.make("Is there parking at the airport office?", "Yes, 20 spaces.")
    texts = [p.text for p in make_probes([*ENTRIES, airport]) if p.kind == "perturbed"]
    assert not any(text.endswith("at the airport?") for text in texts)


def test_the_fingerprint_follows_the_answers() -> None:
    changed = [*ENTRIES[:-1], KbEntry.make(ENTRIES[-1].question, "在App里修改。")]
    assert fingerprint(ENTRIES) == fingerprint(list(reversed(ENTRIES)))
    assert fingerprint(ENTRIES) != fingerprint(changed)


def test_mixed_probes_take_words_of_the_question_and_of_its_answer() -> None:
    question = "How much does the premium plan cost?"
    answer = "Premium is billed monthly through PayPal or a debit card."
    plain, with_own = mixtures(question, answer, random.Random(0))
    question_words = {"much", "premium", "plan", "cost"}
    for text in (plain, with_own):
        words = set(text.split())
        assert words & question_words
        assert words & {"billed", "monthly", "through", "paypal", "debit", "card"}
    assert len(with_own.split()) == len(plain.split()) + 1  # a word of the customer's own
    assert mixtures("怎么修改绑定的手机号？", "在账户设置里修改手机号。", random.Random(0))
    assert first_sentence("Yes. Premium is $10 a month, billed monthly. Cancel any time.") == (
        "Premium is $10 a month, billed monthly."
    )


def test_mixed_and_answer_probes_ask_for_their_own_answer() -> None:
    probes = make_probes(ENTRIES)
    kinds = Counter(probe.kind for probe in probes)
    assert kinds["mixed"] > 0
    assert kinds["answer"] == 4  # one per answer
    keys = {answer_key(e.answer) for e in ENTRIES}
    for probe in probes:
        if probe.kind in ("mixed", "answer"):
            assert probe.answer in keys
            assert not probe.excluded
