"""Before a knowledge-base answer is served verbatim: is the entry about what was asked?

Embeddings place "how do I cancel my gym membership?" next to "how do I cancel my
order?": same frame, different object. Two cheap checks catch most such near
misses, and a message they stop goes to the LLM with the passages instead:

- every entity of the message (number, id, place, name) appears in the entry;
- against the entry's question, as the answer cache checks a near match: the same
  number of negations, no opposite picked ("before" vs "after", 退货 vs 换货), and not
  the same sentence with one word swapped (邮局几点开门 vs 实体店几点开门);
- the message uses no content word the whole knowledge base never uses (gym,
  Netflix, 健身房): a question about something the shop does not talk about is not
  answered from the shop's FAQ, however close its embedding.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kefu.cache.frame import swapped
from kefu.cache.guard import Salient, salient
from kefu.knowledge.entries import KbEntry
from kefu.knowledge.text import has_cjk, tokens

# Words that say nothing about the topic: function words and the generic verbs and
# fillers of customer messages. Only these may be missing from the knowledge base.
_GENERIC_WORDS = """
a an the is are was were be been being am do does did done doing i you we they he she it
my your our me us them their to of in on for at by with from and or but if so as can
could would should will shall may might must how what when where why which who whom
whose this that these those there here have has had having get got gets getting not no
yes please pls plz hi hello hey any some much many more most very just also about into
out up down over than then too its it's i'm i've i'd i'll you're we're don't can't won't
isn't aren't doesn't didn't wasn't haven't hasn't dont cant didnt wont doesnt isnt whats
what's u ur thing things stuff something someone anyone anything nothing want wanted
wants need needed needs know tell say says said come came comes go going goes gone went
put give gave take took make made look see saw find found help keep keeps still again
now today tomorrow yesterday right ok okay thanks thank guys way really actually already
yet even ever only own other else another same new old good bad big small lot lots bit
time times day days week weeks month months long soon ago back like well let lets sure
mine yours one ones all every each both either
"""
GENERIC = frozenset(_GENERIC_WORDS.split())
_SUFFIXES = ("ings", "ing", "ies", "ed", "es", "s", "er", "ly")


def _forms(word: str) -> list[str]:
    """The word and its likely other inflections (lamps ~ lamp, returned ~ returns)."""
    forms = [word]
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) > len(suffix) + 2:
            stem = word[: -len(suffix)]
            forms += [stem, stem + "s", stem + "e", stem + "es", stem + "y"]
    forms += [word + "s", word + "es", word + "ed", word + "ing"]
    return forms


def unfamiliar_terms(message: str, knows: Callable[[str], bool]) -> list[str]:
    """Content terms of the message that no knowledge-base entry uses.

    Chinese is judged by characters (its bigrams are too sparse in a small knowledge
    base); Latin words by their inflected forms; digits are left to the entity check.
    """
    found = []
    for term in tokens(message):
        if has_cjk(term):
            if len(term) == 1 and not knows(term):
                found.append(term)
        elif len(term) == 1 or term in GENERIC or term.isdigit():
            continue  # a lone letter ("p.o. box", "u") says nothing; numbers are entities
        elif not any(map(knows, _forms(term))):
            found.append(term)
    return found


def faq_objection(
    message: str,
    entry: KbEntry,
    knows: Callable[[str], bool],
    *,
    phrasings: Sequence[str] = (),
    max_unfamiliar: int = 0,
) -> str | None:
    """Why the entry must not answer the message verbatim, or None when it may.

    ``phrasings`` are the other questions that share the entry's answer: the message
    needs to agree with one of them ("can't log in" with "I can't log in", not with
    "How do I reset my password?").
    """
    asked = salient(message)
    covered = salient(f"{entry.question}\n{entry.answer}")
    text = f"{entry.question} {entry.answer}".casefold()
    for kind in ("ids", "numbers", "places", "names"):
        for item in sorted(getattr(asked, kind)):
            known: frozenset[str] = getattr(covered, kind)
            if item not in known and item.casefold() not in text and item not in covered.words:
                return f"the entry does not mention {item}"
    differences = [_differs(asked, salient(q)) for q in (entry.question, *phrasings)]
    if all(differences):
        return differences[0]
    unfamiliar = unfamiliar_terms(message, knows)
    if len(unfamiliar) > max_unfamiliar:
        return "the knowledge base never mentions " + ", ".join(unfamiliar[:5])
    return None


def _differs(asked: Salient, question: Salient) -> str | None:
    if asked.negations != question.negations:
        return "the entry answers the question without its negation"
    for group in {g for g, _ in asked.contrasts} & {g for g, _ in question.contrasts}:
        mine = {alt for g, alt in asked.contrasts if g == group}
        theirs = {alt for g, alt in question.contrasts if g == group}
        if mine != theirs:
            return f"the entry is about {', '.join(sorted(theirs))}, not {', '.join(sorted(mine))}"
    swap = swapped(asked.frame, question.frame)
    if swap is not None:
        return f"the entry is about {swap[1]}, not {swap[0]}"
    return None
