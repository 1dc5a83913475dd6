"""Before a knowledge-base answer is served verbatim: is the entry about what was asked?

Embeddings place "how do I cancel my gym membership?" next to "how do I cancel my
order?": same frame, different object. Cheap checks catch most such near misses; what
they find is typed evidence (``Objection``) that the decision (``faq.decide``) weighs
beside the retrieval scores, not a veto:

- every id and proper name of the message (an order number, Amazon, 宜家) appears in
  the entry; numbers, places and days need not (the shipping answer lists the
  countries, so it answers "do you ship to Brazil?" too), but a place the knowledge
  base never names needs an entry that names places at all (德国可以寄吗 is not for
  the pickup lockers' answer);
- the message does not say what it is *not* asking ("I don't need a password reset,
  I forgot my email", 我不是要退货，就想问…), nor ask what the shop sells ("do you sell sofa legs?",
  你们卖沙发套吗) or which product to choose ("which duvet size should I buy?") of an
  entry that is not about that;
- against one of the phrasings that share the entry's answer: no opposite picked
  ("before" vs "after", 退货 vs 换货) and not the same sentence with one word swapped;
- against any one phrasing (the entry's question or another): not the same sentence
  with its subject swapped for one the answer never names (邮局几点开门 vs
  实体店几点开门, however well 门店营业时间 fits);
- the message has a content word at all (not only generic words and places: "what
  time is it in London?");
- every content word is one the knowledge base uses, or a near synonym of one
  (``Vocabulary.nearness_of``): "gym", "router", 电费 are not; "quantity", 划痕 are;
- and at most one is foreign to the chosen answer's own words: "I sent money to the
  wrong bank account" shares "wrong" with "I received the wrong item", and nothing else.
  A product the shop's catalogue names is a detail there, as a place is ("the teak
  bench arrived cracked" asks what to do about damage, whatever the product).

Unlike the answer cache's guard, negation is not compared: a KB answer is general,
and "my parcel didn't arrive", 登不上去 or 你们发美国不 ask the same as their entry.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from kefu.knowledge.entries import KbEntry
from kefu.knowledge.kb_words import AnswerGroup
from kefu.knowledge.vocabulary import is_catalogue
from kefu.text import lexicon, packs, places
from kefu.text.entities import Salient
from kefu.text.frame import swapped
from kefu.text.message import Message, as_message
from kefu.text.words import is_cjk_word


class Concern(Enum):
    """What the guard found wrong with an entry for a message: the decision weighs the
    kind, the reason shown to an operator words it (``Objection.sentence``)."""

    UNMENTIONED = "unmentioned"  # an id or a name of the message the entry does not name
    PLACE = "place"  # a place the knowledge base never names, for an entry naming none
    DENIAL = "denial"  # the message says what it is not asking about
    SELLS = "sells"  # asks what the shop sells, of an entry not about that
    ADVICE = "advice"  # asks which product to choose, of an entry not about that
    ABOUT_ELSE = "about_else"  # an opposite picked or a subject swapped
    NO_TOPIC = "no_topic"  # the message names no topic of its own
    UNKNOWN_WORDS = "unknown_words"  # words the knowledge base never uses
    OFF_TOPIC = "off_topic"  # words the answer does not come near


_SENTENCES = {
    Concern.UNMENTIONED: "the entry does not mention {}",
    Concern.PLACE: "the message names {}; the entry no place",
    Concern.DENIAL: "the message says what it is not asking about",
    Concern.SELLS: "the message asks what the shop sells; the entry is not about that",
    Concern.ADVICE: "the message asks which product to choose; the entry is not about that",
    Concern.ABOUT_ELSE: "the entry is about {}",
    Concern.NO_TOPIC: "the message names no topic of its own",
    Concern.UNKNOWN_WORDS: "the knowledge base never mentions {}",
    Concern.OFF_TOPIC: "the answer is not about {}",
}


@dataclass(frozen=True, slots=True)
class Objection:
    concern: Concern
    detail: str = ""  # the words concerned, for the sentence

    @property
    def sentence(self) -> str:
        return _SENTENCES[self.concern].format(self.detail)


# Chosen on the dev split of benchmarks/data/answer_quality.csv: the unknown words of
# paraphrases (quantity, 块) come nearer a KB word than those of near misses (gym, 微信).
NEAR_ENOUGH = 0.7
# Words of the message that the chosen answer's own text does not come near: one is
# a detail (a paraphrase says "this morning", "instead"); two mean the message is
# about something the shop talks about elsewhere ("the wrong bank account").
OFF_TOPIC_WORDS = 1

# The language packs' words and patterns (kefu.text.packs: each pack's guard.toml).
# GENERIC: words that say nothing about the topic (function words, the generic verbs and
# fillers of customer messages, colours); only these may be missing from the knowledge base.
GENERIC = frozenset(packs.joined("guard", "generic") + packs.joined("guard", "colours"))
# The likely other inflections of a Latin word (lamps ~ lamp, returned ~ returns).
_SUFFIXES = packs.joined("guard", "inflection", "suffixes")
_STEM_ENDINGS = packs.joined("guard", "inflection", "stem_endings")
_WORD_ENDINGS = packs.joined("guard", "inflection", "word_endings")
_CLAUSE_BREAK = re.escape("".join(packs.joined("guard", "clause_breaks")))

# "I don't need X, I ...", 我不是要X，就想…: the message names a topic to set it aside,
# then goes on past a clause break.
_DENIAL = re.compile(
    rf"(?:{packs.any_pattern('guard', 'denial')})[^{_CLAUSE_BREAK}]*[{_CLAUSE_BREAK}]\s*\S",
    re.IGNORECASE,
)
# "Do you sell sofa legs?", 你们卖沙发套吗: a question about the catalogue, which an FAQ
# answers only when it is itself about what the shop sells (not its care or returns).
_SELLS = re.compile(packs.any_pattern("guard", "sells"), re.IGNORECASE)
# "Which duvet size should I buy?", 推荐一款…: advice on what to buy, which a policy
# answer that shares the product's words (exchanging a duvet) does not give.
_ADVICE = re.compile(packs.any_pattern("guard", "advice"), re.IGNORECASE)

# Days and months: a detail of when, like a number; the general answer covers any of
# them ("if I order on a Wednesday can it come the same day?").
_WHEN = frozenset(lexicon.WEEKDAYS_EN) | frozenset(
    prefix + day for prefix in lexicon.WEEKDAY_PREFIXES_ZH for day in lexicon.WEEKDAYS_ZH
)
_WHEN_NAMES = frozenset(lexicon.WEEKDAYS_EN.values()) | frozenset(lexicon.WEEKDAYS_ZH.values())


class Lexicon(Protocol):
    """What the guard asks of the knowledge base's words (``knowledge.Vocabulary``)."""

    def __contains__(self, word: str) -> bool: ...

    def nearness_of(self, words: Sequence[str]) -> list[float]: ...


def _forms(word: str) -> list[str]:
    """The word and its likely other inflections (lamps ~ lamp, returned ~ returns)."""
    forms = [word]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            stem = word[: -len(suffix)]
            forms += [stem, *(stem + ending for ending in _STEM_ENDINGS)]
            if len(stem) > 2 and stem[-1] == stem[-2]:  # cancelled ~ cancel, shipping ~ ship
                forms.append(stem[:-1])
    forms += [word + ending for ending in _WORD_ENDINGS]
    return forms


def content_words(message: str | Message, entities: frozenset[str] = frozenset()) -> list[str]:
    """The words that say what the message is about: not generic, not a number, not one
    of ``entities``, not a lone Latin letter ("p.o. box", "u")."""
    return [
        word
        for word in as_message(message).words
        if word not in GENERIC
        and not word.isdigit()
        and word not in entities
        and (len(word) > 1 or is_cjk_word(word))
    ]


def uses(lexicon: Lexicon, word: str) -> bool:
    """Whether the lexicon has the word: a Chinese one as a dictionary word, a Latin one
    in any of its likely inflections."""
    if is_cjk_word(word):
        return word in lexicon
    return any(form in lexicon for form in _forms(word))


def unfamiliar_terms(
    message: str | Message,
    vocabulary: Lexicon,
    *,
    entities: frozenset[str] = frozenset(),
) -> list[str]:
    """Content words of the message that the knowledge base neither uses nor comes near.

    Chinese is judged by dictionary words, Latin words by their inflected forms.
    Numbers and ``entities`` (the words of the places and days named) are not the
    topic: a general answer covers any of them.
    """
    return _unfamiliar(content_words(message, entities), vocabulary)


def _nearness_of_unused(words: Sequence[str], vocabulary: Lexicon) -> list[tuple[str, float]]:
    """The words ``vocabulary`` does not use, each with how near it comes to one it does."""
    unused = [word for word in words if not uses(vocabulary, word)]
    return list(zip(unused, vocabulary.nearness_of(unused), strict=True))


def _unfamiliar(words: Sequence[str], vocabulary: Lexicon) -> list[str]:
    return [word for word, near in _nearness_of_unused(words, vocabulary) if near < NEAR_ENOUGH]


def word_evidence(
    message: str | Message, kb_words: Lexicon, answer: AnswerGroup
) -> tuple[int, int, float]:
    """How many of the message's content words the knowledge base never uses, how many
    it uses but not in this answer (its questions and text): words of another topic, and
    how near the least covered of them comes to the answer's words (1.0 when the answer
    uses them all). The calibrated decision weighs these where the guard's rules draw
    lines: a near miss swaps one word for one the answer does not come near (Dropbox for
    Google Drive, 借记卡 for 信用卡), where a paraphrase's own words stay near it."""
    topic = content_words(message)
    unknown = _unfamiliar(topic, kb_words)
    unused = _nearness_of_unused(topic, answer.vocabulary)
    foreign = [word for word, near in unused if near < NEAR_ENOUGH and word not in unknown]
    weakest = min((near for _, near in unused), default=1.0)
    return len(unknown), len(foreign), min(max(weakest, 0.0), 1.0)


def faq_objection(
    message: str | Message,
    entry: KbEntry,
    *,
    kb_words: Lexicon,
    answer: AnswerGroup,
    catalogue: Lexicon | None = None,
) -> Objection | None:
    """Why the entry must not answer the message verbatim, or None when it may.

    ``kb_words`` are the words of the whole knowledge base; ``answer`` is the entry's
    answer with every question it answers, read ahead: the message needs to agree with
    one of those questions ("can't log in" with "I can't log in", not with "How do I
    reset my password?"). ``catalogue`` are the products the shop's catalogue entries
    name: a product it sells is a detail of a question about anything else (returns
    cover the blanket too).
    """
    message = as_message(message)
    asked = message.entities
    covered = answer.coverage
    text = covered.text
    for kind in ("ids", "names"):
        for item in sorted(getattr(asked, kind)):
            if kind == "names" and item in _WHEN_NAMES:
                continue
            known: frozenset[str] = getattr(covered, kind)
            if item not in known and item.casefold() not in text and item not in covered.words:
                return Objection(Concern.UNMENTIONED, item)
    elsewhere_places = [p for p in sorted(asked.places) if not _named(p, kb_words)]
    if elsewhere_places and not covered.places:
        # A place is a detail of an answer that names places (the list of countries
        # answers "do you ship to Brazil?"), not of one that names none: the pickup
        # lockers' answer does not say whether a parcel goes to Germany. A place the
        # shop names somewhere (its own country) is where customers are, not a topic.
        return Objection(Concern.PLACE, ", ".join(elsewhere_places))
    if _DENIAL.search(message.folded):
        return Objection(Concern.DENIAL)
    if _SELLS.search(message.folded) and not _SELLS.search(text):
        return Objection(Concern.SELLS)
    if _ADVICE.search(message.folded) and not _ADVICE.search(text):
        return Objection(Concern.ADVICE)
    # Each phrasing's entities and its minimal pair with the message, read once for the
    # two checks below.
    questions = answer.questions(entry)
    swaps = [swapped(asked.frame, question.frame) for question in questions]
    differences = [_differs(asked, q, swap) for q, swap in zip(questions, swaps, strict=True)]
    if differences[0] is not None and all(differences[1:]):
        return differences[0]
    topic = content_words(message, _place_words(asked) | _WHEN)
    if not topic:
        # "what time is it in London?" shares only a place and generic words with the
        # phrasing that matched it: nothing says the topic is the same.
        return Objection(Concern.NO_TOPIC)
    unfamiliar = _unfamiliar(topic, kb_words)
    if unfamiliar:
        return Objection(Concern.UNKNOWN_WORDS, ", ".join(unfamiliar[:5]))
    if catalogue is not None and not is_catalogue(entry):
        topic = [word for word in topic if not uses(catalogue, word)]
    for swap in swaps:
        if swap is not None and _unfamiliar(_within(topic, swap[0]), answer.vocabulary):
            # 邮局几点开门 is 实体店几点开门 with its subject swapped for one the answer
            # never names: however well other phrasings fit, it asks about something else.
            return Objection(Concern.ABOUT_ELSE, f"{swap[1]}, not {swap[0]}")
    elsewhere = _unfamiliar(topic, answer.vocabulary)
    if len(elsewhere) > OFF_TOPIC_WORDS:  # one is a detail ("this morning", "instead")
        return Objection(Concern.OFF_TOPIC, ", ".join(elsewhere[:5]))
    return None


def _within(words: Sequence[str], span: str) -> list[str]:
    """The words a swapped span falls in: Latin ones by name, Chinese ones by character
    (the span 急 of 加急 stands for the word 加急)."""
    latin = set(span.split())
    return [w for w in words if w in latin or (is_cjk_word(w) and not set(w).isdisjoint(span))]


def _named(place: str, lexicon: Lexicon) -> bool:
    """Whether the knowledge base names the place, in English or in Chinese."""
    english = place.split()
    if all(uses(lexicon, word) for word in english):
        return True
    return any(name in lexicon for name in places.CHINESE_NAMES.get(place, ()))


def _place_words(asked: Salient) -> frozenset[str]:
    """The words that name the message's places, in English and in Chinese."""
    words = {word for place in asked.places for word in place.split()}
    words.update(name for place in asked.places for name in places.CHINESE_NAMES.get(place, ()))
    return frozenset(words)


def _differs(asked: Salient, question: Salient, swap: tuple[str, str] | None) -> Objection | None:
    """How the question differs from the message: an opposite picked, or ``swap``, the
    minimal pair of their frames."""
    for group in {g for g, _ in asked.contrasts} & {g for g, _ in question.contrasts}:
        mine = {alt for g, alt in asked.contrasts if g == group}
        theirs = {alt for g, alt in question.contrasts if g == group}
        if mine != theirs:
            detail = f"{', '.join(sorted(theirs))}, not {', '.join(sorted(mine))}"
            return Objection(Concern.ABOUT_ELSE, detail)
    if swap is not None:
        return Objection(Concern.ABOUT_ELSE, f"{swap[1]}, not {swap[0]}")
    return None
