"""The FAQ guard: an entry is served verbatim only when it is about what was asked."""

from __future__ import annotations

from kefu.fastpath.faq_guard import faq_objection, unfamiliar_terms
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.text import tokens

RETURNS = KbEntry.make(
    "How do I start a return?",
    "Go to My Orders, choose the order and click Return Item within 30 days.",
)
SHIPPING = KbEntry.make(
    "Which countries do you ship to?",
    "We ship to Singapore, Malaysia and Japan; not to the United States.",
)
HOURS_ZH = KbEntry.make("实体店几点开门？", "实体店每天10:00至21:00营业。")
PASSWORD_ZH = KbEntry.make("忘记密码了怎么办？", "在登录页点击“忘记密码”，按邮件里的链接重置。")
# Another phrasing of PASSWORD_ZH's question, kept in the KB with the same answer.
PASSWORD_ZH_TOO = KbEntry.make("我不记得密码了", PASSWORD_ZH.answer)

VOCABULARY = {
    term
    for entry in (RETURNS, SHIPPING, HOURS_ZH, PASSWORD_ZH, PASSWORD_ZH_TOO)
    for term in tokens(f"{entry.question} {entry.answer}")
}


def knows(term: str) -> bool:
    return term in VOCABULARY


def test_a_paraphrase_in_the_shops_words_is_served() -> None:
    assert faq_objection("how do i return an order?", RETURNS, knows) is None
    assert faq_objection("do you ship to japan", SHIPPING, knows) is None


def test_a_word_the_knowledge_base_never_uses_stops_it() -> None:
    why = faq_objection("How do I return to the home page of the app?", RETURNS, knows)
    assert why is not None
    assert "app" in why
    assert "home" in why


def test_generic_words_and_inflections_are_not_unfamiliar() -> None:
    assert unfamiliar_terms("please tell me how returning works", knows) == ["works"]
    assert unfamiliar_terms("orders returned", knows) == []


def test_an_entity_the_entry_does_not_mention_stops_it() -> None:
    why = faq_objection("Do you ship to Brazil?", SHIPPING, knows)
    assert why is not None
    assert "brazil" in why.casefold()
    assert faq_objection("Do you ship to Malaysia?", SHIPPING, knows) is None


def test_a_swapped_word_or_a_negation_against_the_question_stops_it() -> None:
    assert faq_objection("邮局几点开门？", HOURS_ZH, knows) is not None
    negated = "不是忘记密码了"
    assert faq_objection(negated, PASSWORD_ZH, knows) is not None


def test_one_agreeing_phrasing_of_the_same_answer_is_enough() -> None:
    message = "我不记得密码了怎么办？"
    assert faq_objection(message, PASSWORD_ZH, knows) is not None
    phrasings = [PASSWORD_ZH_TOO.question]
    assert faq_objection(message, PASSWORD_ZH, knows, phrasings=phrasings) is None


def test_chinese_is_judged_by_characters() -> None:
    assert unfamiliar_terms("健身房几点开门", knows) == ["健", "身", "房"]


def test_lone_letters_are_not_words() -> None:
    found = unfamiliar_terms("can u ship to a p.o. box", knows)
    assert "u" not in found
    assert "p" not in found
    assert "o" not in found
