"""The messages the decision is measured on, made from the knowledge base itself (its
weights are the prior's, fitted on customers' wording: ``calibration/prior.py``).

A shop brings its FAQ, not its customers' messages, so the probes are what the entries
can stand in for:

- ``phrasing``: an answer's question asked while that question is left out of the
  search (leave-one-out); its other questions should still find the answer. Only an
  answer with two or more questions has these.
- ``reworded``: a question as customers type it: its content words alone, lower
  case, a typo, or wrapped in an aside from a generic list (``static/asides.txt``:
  "i'm in a hurry, ...", 麻烦问下，...). The only right-answer probes an answer with
  one question has, and easier than a real paraphrase (the question's own words):
  an estimate fitted on them alone is optimistic where customers use other words.
- ``mixed``: half of a question's content words and a few of its answer's, shuffled;
  ``answer``: the answer's first sentence. Customers word a question neither as the
  FAQ's writer did nor with its words alone: they name what they have in front of
  them, which is often in the answer ("can I pay with PayPal"). On the dev messages
  written for three knowledge bases, these probes' e5 similarity, lead and hit rate
  (median 0.87-0.93, 0.01-0.02, 50-75 % nearest right) sit where real paraphrases'
  do (0.88-0.92, 0.01-0.02, ~55 %), while ``reworded`` sits far above (0.96-0.99,
  0.07, 99 %). Labelled with their own answer: where the looks pick another, that is
  a wrong answer of the kind customers' wording causes.
- ``removed``: an answer's question asked while the whole answer is left out: the
  knowledge base's own topic, with nothing that answers it. Every answer has one.
- ``perturbed``: a question with its most specific word swapped for another answer's
  (the entity or the object changed): near misses, which should not get the answer
  they came from; or set elsewhere (``static/elsewhere.txt``: "... at the post office?",
  在邮局...), unless the knowledge base names that place or thing. Not negated:
  "can't I return it?" asks what "can I return it?" asks.
- ``out_of_scope``: a generic, domain-free set of messages shipped with kefu
  (``static/out_of_scope.txt``), in English and Chinese.

Paraphrases by a model are not made: the bundled model (SmolLM2-135M) copies or
garbles a question more often than it rewords it, and one wrong paraphrase labelled
right teaches the decision to serve a wrong answer.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Literal

from kefu.knowledge.entries import KbEntry, answer_key
from kefu.text.normalize import normalize
from kefu.text.words import is_cjk_word, language, words_of

ProbeKind = Literal[
    "phrasing", "reworded", "mixed", "answer", "removed", "perturbed", "out_of_scope"
]
OUT_OF_SCOPE = Path(__file__).parent / "static" / "out_of_scope.txt"
ASIDES = Path(__file__).parent / "static" / "asides.txt"
ELSEWHERE = Path(__file__).parent / "static" / "elsewhere.txt"
CUSTOMER_WORDS = Path(__file__).parent / "static" / "customer_words.txt"
# Bounds on the probes of each kind: the second look embeds each one (about 17 ms a
# pass), so a large knowledge base is sampled, not walked.
MAX_PHRASINGS = 600
MAX_PER_KIND = 300
# Mixed probes per answer, and the answer's words each takes.
MIXED_PER_ANSWER = 2
ANSWER_WORDS = 3
_SENTENCE_END = re.compile(r"(?<=[.;!?。；！？])\s*")
# Words a question is asked with rather than about: dropped when it is cut down.
_FRAME_WORDS = """
a an the i me my we us our you your it its is are was be been do does did can could will
would should shall may might must have has had to of for in on at by with and or if how
what when where which who why there this that these those any some please about get
请问 请 我 我的 我们 你 你们 您 的 了 吗 呢 吧 啊 怎么 如何 可以 能 能否 是 有 什么 一下 要 想
"""
_FRAME = frozenset(_FRAME_WORDS.split())


@dataclass(frozen=True, slots=True)
class Probe:
    text: str
    kind: ProbeKind
    answer: str | None  # the answer key that is right; None: nothing should answer
    excluded: frozenset[str] = frozenset()  # entry ids left out of both looks' searches


def fingerprint(entries: Sequence[KbEntry]) -> str:
    """What a calibration was fitted to: the entries' ids and answers."""
    digest = hashlib.sha1()
    for entry in sorted(entries, key=lambda e: e.id):
        digest.update(f"{entry.id}\t{entry.kind}\t{answer_key(entry.answer)}\n".encode())
    return digest.hexdigest()[:16]


def make_probes(entries: Sequence[KbEntry]) -> list[Probe]:
    """Every kind of probe for these entries; the same entries make the same probes."""
    groups: dict[str, list[KbEntry]] = {}
    for entry in sorted(entries, key=lambda e: e.id):
        if entry.kind == "faq":
            groups.setdefault(answer_key(entry.answer), []).append(entry)
    rng = random.Random(fingerprint(entries))
    answers = sorted(groups)
    phrasings = [
        Probe(entry.question, "phrasing", key, frozenset({entry.id}))
        for key in answers
        if len(groups[key]) > 1
        for entry in groups[key]
    ]
    probes = _sample(phrasings, MAX_PHRASINGS, rng)
    reworded = [
        Probe(text, "reworded", key)
        for key in answers
        for entry in groups[key][:2]
        for text in rewordings(entry.question, rng)
    ]
    mixed = [
        Probe(text, "mixed", key)
        for key in answers
        for text in mixtures(groups[key][0].question, groups[key][0].answer, rng)
    ]
    from_answers = [
        Probe(sentence, "answer", key)
        for key in answers
        if (sentence := first_sentence(groups[key][0].answer)) is not None
    ]
    removed = [
        Probe(
            rng.choice(groups[key]).question,
            "removed",
            None,
            frozenset(e.id for e in groups[key]),
        )
        for key in answers
    ]
    perturbed = [
        text
        for key in answers
        for text in _perturbations(rng.choice(groups[key]).question, groups, key, rng)
    ]
    named = {word for entry in entries for word in words_of(f"{entry.question} {entry.answer}")}
    elsewhere = [line for line in _lines(ELSEWHERE) if named.isdisjoint(_content(line))]
    if elsewhere:
        perturbed += [
            _set_elsewhere(rng.choice(groups[key]).question, elsewhere, rng) for key in answers
        ]
    # One near miss per answer, of either kind: as many as there are answers with
    # nothing to answer them (``removed``), so in-domain misses do not outnumber the
    # right-answer probes twice over (customers' near misses do not either).
    rng.shuffle(perturbed)
    perturbed = perturbed[: len(answers)]
    probes += _sample(reworded, MAX_PER_KIND, rng) + _sample(removed, MAX_PER_KIND, rng)
    probes += _sample(mixed, MAX_PER_KIND, rng) + _sample(from_answers, MAX_PER_KIND, rng)
    probes += _sample([Probe(t, "perturbed", None) for t in perturbed], MAX_PER_KIND, rng)
    probes += [Probe(text, "out_of_scope", None) for text in out_of_scope()]
    return probes


def _sample(probes: list[Probe], limit: int, rng: random.Random) -> list[Probe]:
    return probes if len(probes) <= limit else rng.sample(probes, limit)


def rewordings(question: str, rng: random.Random) -> list[str]:
    """The question as its content words, and (English) lower case with a typo."""
    words = words_of(question)
    if language(question) == "zh":
        kept = [w for w in words if w not in _FRAME]
        cut = "".join(kept)
        bare = re.sub(r"^(请问|我想问一下|我想问)|[吗呢吧啊]?[？?。！!]*$", "", question.strip())
        out = [cut, bare, _aside(question, "zh", rng)]
    else:
        kept = [w for w in words if w not in _FRAME]
        cut = " ".join(kept)
        typed = " ".join(_typo(w, rng) if w == max(words, key=len) else w for w in words)
        out = [cut, typed, _aside(question, "en", rng)]
    seen = {normalize(question)}
    unique = []
    for text in out:
        if len(text) >= 2 and normalize(text) not in seen:
            seen.add(normalize(text))
            unique.append(text)
    return unique


def mixtures(question: str, answer: str, rng: random.Random) -> list[str]:
    """Half the question's content words and ``ANSWER_WORDS`` of the answer's, shuffled."""
    mine = _content(question)
    theirs = [w for w in dict.fromkeys(_content(answer)) if w not in mine]
    if not mine or not theirs:
        return []
    lang = language(question)
    joiner = "" if lang == "zh" else " "
    own = [w for w in _lines(CUSTOMER_WORDS) if language(w) == lang]
    out: list[str] = []
    for n in range(MIXED_PER_ANSWER):
        words = rng.sample(mine, max(1, len(mine) // 2))
        words += rng.sample(theirs, min(ANSWER_WORDS, len(theirs)))
        if n % 2 and own:  # every other one with a word of the customer's own
            words.append(rng.choice(own))
        rng.shuffle(words)
        text = joiner.join(words)
        if text not in out:
            out.append(text)
    return out


def first_sentence(answer: str) -> str | None:
    """The answer's first sentence of some length (a statement in the answer's words)."""
    for sentence in _SENTENCE_END.split(answer.strip()):
        if len(sentence) >= (8 if language(sentence) == "zh" else 20):
            return sentence[:200]
    return None


def _set_elsewhere(question: str, places: list[str], rng: random.Random) -> str:
    lang = language(question)
    mine = [place for place in places if language(place) == lang] or places
    place = rng.choice(mine)
    if lang == "zh":
        return place + question
    return question.rstrip(" ?") + f" {place}?"


def _aside(question: str, lang: str, rng: random.Random) -> str:
    chosen = rng.choice([line for line in _lines(ASIDES) if language(line) == lang])
    return f"{chosen} {question[:1].lower()}{question[1:]}" if lang == "en" else chosen + question


def _typo(word: str, rng: random.Random) -> str:
    """Two neighbouring letters swapped, inside the word."""
    if len(word) < 4:
        return word
    i = rng.randrange(1, len(word) - 2)
    return word[:i] + word[i + 1] + word[i] + word[i + 2 :]


def _perturbations(
    question: str, groups: dict[str, list[KbEntry]], key: str, rng: random.Random
) -> list[str]:
    """The question with its most specific word swapped for one of another answer's
    questions in the same language."""
    others = [
        entry.question
        for other in groups
        if other != key
        for entry in groups[other][:1]
        if language(entry.question) == language(question)
    ]
    if others:
        swapped = swap_subject(question, rng.choice(others))
        if swapped is not None and swapped != question:
            return [swapped]
    return []


def swap_subject(question: str, other: str) -> str | None:
    """``question`` with its longest word that ``other`` lacks replaced by ``other``'s
    longest word that ``question`` lacks: the same frame about another thing."""
    mine, theirs = _content(question), _content(other)
    ours = [w for w in mine if w not in theirs]
    new = [w for w in theirs if w not in mine]
    if not ours or not new:
        return None
    old = max(ours, key=len)
    if is_cjk_word(old):
        return question.replace(old, max(new, key=len), 1)
    return re.sub(rf"\b{re.escape(old)}\b", max(new, key=len), question, count=1, flags=re.I)


def _content(text: str) -> list[str]:
    """Words that name a thing: 4+ letters, or 2+ Chinese characters, not the frame."""
    return [w for w in words_of(text) if len(w) >= (2 if is_cjk_word(w) else 4) and w not in _FRAME]


def out_of_scope() -> tuple[str, ...]:
    return _lines(OUT_OF_SCOPE)


@cache
def _lines(path: Path) -> tuple[str, ...]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return tuple(line.strip() for line in lines if line.strip() and not line.startswith("#"))
