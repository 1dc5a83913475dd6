"""The FAQ guard: an entry is served verbatim only when it is about what was asked."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence

import pytest

from kefu.faq.guard import Concern, faq_objection, unfamiliar_terms
from kefu.knowledge.embedder import StaticEmbedder
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.kb_words import AnswerGroup
from kefu.knowledge.vocabulary import Vocabulary, WordVectors, catalogue_products, is_catalogue

RETURNS = KbEntry.make(
    "How do I start a return?",
    "Go to My Orders, choose the order and click Return Item within 30 days.",
)
EXCHANGES = KbEntry.make(
    "Can I exchange an item for a different size?",
    "Yes: start a return and choose Exchange; we send the new size when yours arrives.",
)
SHIPPING = KbEntry.make(
    "Which countries do you ship to?",
    "We ship to Singapore, Malaysia and Japan; not to the United States.",
)
WRONG_ITEM = KbEntry.make(
    "I received the wrong item. What should I do?",
    "Sorry! Send us a photo of the item and its label; we collect it and send yours.",
)
PAYMENT = KbEntry.make(
    "Which payment methods do you accept?",
    "Cards, PayPal and bank transfer to our business account; the money is taken at checkout.",
)
GIFT_CARDS = KbEntry.make(
    "Do you sell gift cards?", "Yes: we sell gift cards from SGD 20 at checkout."
)
CARE = KbEntry.make(
    "How do I clean the sofa covers?",
    "Sofa covers are machine washable at 30 degrees; do not tumble dry.",
)
PASSWORD = KbEntry.make(
    "How do I reset my password?", "Use the Forgot password link on the login page."
)
CATALOGUE = KbEntry.make(
    "What products do you sell?",
    "Living room: sofas, armchairs, rugs, lamps, cushions, linen throws and wool blankets. "
    "Materials: oak, teak and linen.",
    category="catalogue",
)
CATALOGUE_ZH = KbEntry.make(
    "你们都卖哪些商品？",
    "沙发、地毯、台灯、靠垫和毯子；材质：橡木、柚木和亚麻。",
    category="catalogue",
)
HOURS_ZH = KbEntry.make("实体店几点开门？", "实体店每天10:00至21:00营业。")
HOURS_ZH_TWIN = KbEntry.make("门店营业时间是？", HOURS_ZH.answer)
PO_BOX_ZH = KbEntry.make("能寄到邮局信箱吗？", "不能，快递需要街道地址。")
RETURNS_ZH = KbEntry.make("退货政策是什么？", "签收后30天内可以退货，请在订单页申请。")
SHIPPING_ZH = KbEntry.make("能寄到哪些国家？", "我们寄新加坡、马来西亚和日本，不寄美国。")
ALL = [RETURNS, EXCHANGES, SHIPPING, WRONG_ITEM, PAYMENT, GIFT_CARDS, CARE, PASSWORD]
ALL += [HOURS_ZH, HOURS_ZH_TWIN, PO_BOX_ZH, RETURNS_ZH, SHIPPING_ZH, CATALOGUE, CATALOGUE_ZH]
Objection = Callable[..., str | None]  # (message, entry, phrasings=()) -> why, or None


@pytest.fixture(scope="module")
def kb_words(static_embedder: StaticEmbedder) -> Vocabulary:
    return Vocabulary.of((f"{e.question}\n{e.answer}" for e in ALL), static_embedder)


@pytest.fixture(scope="module")
def catalogue(static_embedder: StaticEmbedder) -> Vocabulary:
    products = Vocabulary(WordVectors(static_embedder))
    for entry in (CATALOGUE, CATALOGUE_ZH):
        assert is_catalogue(entry)
        products.add(catalogue_products(entry.answer))
    return products


@pytest.fixture(scope="module")
def objection(
    static_embedder: StaticEmbedder, kb_words: Vocabulary, catalogue: Vocabulary
) -> Objection:
    def check(
        message: str,
        entry: KbEntry,
        phrasings: Sequence[str] = (),
        *,
        products: bool = True,
    ) -> str | None:
        found = faq_objection(
            message,
            entry,
            kb_words=kb_words,
            answer=AnswerGroup.of(entry, phrasings, static_embedder),
            catalogue=catalogue if products else None,
        )
        return None if found is None else found.sentence

    return check


def test_a_paraphrase_in_the_shops_words_is_served(objection: Objection) -> None:
    assert objection("how do i return an order?", RETURNS) is None
    assert objection("do you ship to japan", SHIPPING) is None
    assert objection("退货政策", RETURNS_ZH) is None


def test_places_numbers_and_days_the_entry_does_not_name_do_not_stop_it(
    objection: Objection,
) -> None:
    # The shipping answer lists the countries: it answers Brazil too (with a no).
    assert objection("Do you ship to Brazil?", SHIPPING) is None
    assert objection("can i return 2 items?", RETURNS) is None
    assert objection("寄不寄美国", SHIPPING_ZH) is None
    assert objection("can I start a return on a Wednesday?", RETURNS) is None
    assert objection("周三能退货吗", RETURNS_ZH) is None


def test_a_place_needs_an_entry_that_names_places(objection: Objection) -> None:
    # The returns answer names no place: it cannot say whether a return from Germany works.
    why = objection("德国可以退货吗", RETURNS_ZH)
    assert why == "the message names germany; the entry no place"
    assert objection("can i return a lamp from Germany?", RETURNS) is not None
    assert objection("寄德国吗", SHIPPING_ZH) is None  # it names places: the list answers it
    # A place the shop names somewhere is where its customers are, not the topic.
    assert objection("我在新加坡，退货政策是什么", RETURNS_ZH) is None


def test_a_name_or_brand_the_entry_does_not_mention_stops_it(objection: Objection) -> None:
    why = objection("What's the return policy of Amazon?", RETURNS)
    assert why is not None
    assert "amazon" in why.casefold()
    why = objection("淘宝的退货政策是什么", RETURNS_ZH)
    assert why is not None
    assert "淘宝" in why
    assert objection("Do you accept PayPal?", PAYMENT) is None  # the entry names it


def test_a_word_the_knowledge_base_never_uses_nor_comes_near_stops_it(objection: Objection) -> None:
    why = objection("Can I cancel my gym membership through you?", RETURNS)
    assert why is not None
    assert "gym" in why
    why = objection("健身房几点开门", HOURS_ZH)
    assert why is not None
    assert "健身房" in why


def test_the_findings_are_typed(
    static_embedder: StaticEmbedder, kb_words: Vocabulary, catalogue: Vocabulary
) -> None:
    """The decision weighs the kind of objection, never its wording."""

    def concern(message: str, entry: KbEntry) -> Concern | None:
        answer = AnswerGroup.of(entry, (), static_embedder)
        found = faq_objection(message, entry, kb_words=kb_words, answer=answer, catalogue=catalogue)
        return None if found is None else found.concern

    assert concern("how do i return an order?", RETURNS) is None
    assert concern("how do i return an order tho?", RETURNS) is Concern.UNKNOWN_WORDS
    assert concern("What's the return policy of Amazon?", RETURNS) is Concern.UNMENTIONED
    assert concern("wrong bank account, what should I do?", WRONG_ITEM) is Concern.OFF_TOPIC
    assert concern("what time is it in London?", RETURNS) is Concern.PLACE
    assert concern("德国可以退货吗", RETURNS_ZH) is Concern.PLACE


def test_two_words_foreign_to_the_answer_stop_it(objection: Objection) -> None:
    # Every word is the shop's (the payment answer has bank, account, money), but only
    # "wrong" is the wrong-item answer's.
    why = objection("wrong bank account, what should I do?", WRONG_ITEM)
    assert why == "the answer is not about bank, account"
    assert objection("I got the wrong item, what should I do?", WRONG_ITEM) is None


def test_a_product_the_catalogue_names_is_a_detail_of_another_answer(
    objection: Objection,
) -> None:
    message = "a linen throw blanket, how do I start a return?"
    assert objection(message, RETURNS) is None
    # Without the catalogue the products are words the returns answer never uses.
    assert objection(message, RETURNS, products=False) == (
        "the answer is not about linen, throw, blanket"
    )
    assert objection("柚木毯子怎么退货", RETURNS_ZH) is None
    # Products aside, the rest must still be the answer's: one foreign word at most.
    assert objection("a linen throw, my gift card password, how do I start a return?", RETURNS) == (
        "the answer is not about gift, card, password"
    )
    # A modifier in a listed item ("living room") names no product.
    assert objection("my living room, how do I start a return?", RETURNS) == (
        "the answer is not about living, room"
    )


def test_a_product_is_no_detail_of_a_catalogue_entry(objection: Objection) -> None:
    lighting = KbEntry.make("What lighting do you sell?", "Table lamps and floor lamps.")
    message = "do you have lamps, cushions and blankets?"
    assert objection(message, lighting) is None  # an FAQ about lighting: details
    # Asked of the catalogue, the products are the topic: these two are not its own.
    as_catalogue = dataclasses.replace(lighting, category="Catalogue")
    assert objection(message, as_catalogue) == "the answer is not about cushions, blankets"


def test_an_ordinal_names_no_topic(objection: Objection) -> None:
    # "the second one" of what? (A follow-up is the router's to stop: rules.is_follow_up.)
    assert objection("I want the second one", EXCHANGES) == "the message names no topic of its own"


def test_a_request_for_advice_stops_an_entry_about_something_else(objection: Objection) -> None:
    why = "the message asks which product to choose; the entry is not about that"
    assert objection("which size should I buy for a queen bed?", EXCHANGES) == why
    assert objection("推荐一款适合小户型的沙发", CARE) == why


def test_saying_what_it_is_not_about_stops_it(objection: Objection) -> None:
    message = "I don't need a password reset, I forgot which email I signed up with"
    assert objection(message, PASSWORD) == "the message says what it is not asking about"
    curly = message.replace("'", "\u2019")  # as phone keyboards type it
    assert objection(curly, PASSWORD) == "the message says what it is not asking about"
    assert objection("我不是要退货，就想问问政策", RETURNS_ZH) == (
        "the message says what it is not asking about"
    )
    # 是不是要…, a question ("is it that I must…?"), denies nothing.
    assert objection("是不是要先申请退货，再寄回？", RETURNS_ZH) != (
        "the message says what it is not asking about"
    )


def test_asking_what_the_shop_sells_needs_an_entry_about_that(objection: Objection) -> None:
    why = objection("Do you sell sofa covers?", CARE)
    assert why is not None
    assert "sells" in why
    sells = "the message asks what the shop sells; the entry is not about that"
    assert objection("你们卖沙发套吗", CARE) == sells
    assert objection("And does it come in other sizes?", EXCHANGES) == sells
    assert objection("can you sell me a gift card?", GIFT_CARDS) is None
    # Selling words that ask nothing of the catalogue.
    assert objection("can I carry the sofa covers to the washing machine?", CARE) != (
        "the message asks what the shop sells; the entry is not about that"
    )


def test_a_message_of_generic_words_and_places_names_no_topic(objection: Objection) -> None:
    assert (
        objection("what time is it in Japan?", SHIPPING) == "the message names no topic of its own"
    )
    assert objection("do you ship to Japan?", SHIPPING) is None


def test_negation_is_not_compared(objection: Objection) -> None:
    # A general answer answers the negated question too; the cache's guard, whose
    # answers were written for one question, does compare negations.
    assert objection("why can't I reset my password", PASSWORD) is None


def test_a_swapped_word_against_every_phrasing_stops_it(objection: Objection) -> None:
    why = objection("邮局几点开门？", HOURS_ZH)
    assert why is not None
    assert "邮局" in why  # 邮局 for 实体店: swapped, or a word the shop never uses


def test_a_swapped_subject_the_answer_never_names_stops_it(objection: Objection) -> None:
    # The shop names 邮局 elsewhere (PO boxes), and another phrasing of the hours does not
    # differ from the message; but the message is the entry's question with its subject
    # swapped for one the hours answer never names.
    why = objection("邮局几点开门？", HOURS_ZH, phrasings=[HOURS_ZH_TWIN.question])
    assert why == "the entry is about 实体店, not 邮局"
    # A swapped-in word the answer's phrasings use is a rewording, not another subject.
    assert objection("门店几点开门？", HOURS_ZH, phrasings=[HOURS_ZH_TWIN.question]) is None


def test_one_agreeing_phrasing_of_the_same_answer_is_enough(objection: Objection) -> None:
    message = "could I exchange an item for a different size?"
    why = objection(message, RETURNS)
    assert why is not None
    assert "exchange" in why or "return" in why  # opposites: return vs exchange
    assert objection(message, RETURNS, phrasings=[EXCHANGES.question]) is None


def test_generic_words_colours_and_inflections_are_not_unfamiliar(kb_words: Vocabulary) -> None:
    assert unfamiliar_terms("orders returned, please", kb_words) == []
    assert unfamiliar_terms("the blue one is the wrong item", kb_words) == []
    assert unfamiliar_terms("shipping", kb_words) == []  # ship ~ shipping
    assert unfamiliar_terms("my order's return", kb_words) == []  # order's ~ order


def test_chinese_is_judged_by_words(kb_words: Vocabulary) -> None:
    assert unfamiliar_terms("实体店几点开门", kb_words) == []
    assert unfamiliar_terms("健身房几点开门", kb_words) == ["健身房"]


def test_lone_letters_are_not_words(kb_words: Vocabulary) -> None:
    found = unfamiliar_terms("can u ship to a p.o. box", kb_words)
    assert "u" not in found
    assert "p" not in found
    assert "o" not in found
