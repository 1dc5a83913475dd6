"""What the FAQ guard reads of a knowledge base, kept in step with its entries.

The guard compares a message with the chosen answer: with the words of the whole
knowledge base, with the words and names the answer and its questions use, and with
each of those questions. Word lists change per entry added or removed, never by
cutting every entry again. The entities of the texts (``text.entities.salient``, about
0.25 ms a text, a few ms an answer) are read ahead on another thread (``unread``, then
``read_texts`` there, then ``learn``), so the first customer to ask about an answer does
not pay for them; a text not yet read ahead is read when the guard first needs it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from kefu.knowledge.embedder import Embedder
from kefu.knowledge.entries import KbEntry, answer_key
from kefu.knowledge.vocabulary import Vocabulary, WordVectors, catalogue_products, is_catalogue
from kefu.text.entities import Salient, salient
from kefu.text.normalize import fold
from kefu.text.words import words_of


def entry_words(entry: KbEntry) -> list[str]:
    """The words an entry adds to the vocabularies (jieba's work, the costly part: an
    import thread computes them ahead for ``KnowledgeBase.add(ready=...)``)."""
    return words_of(f"{entry.question}\n{entry.answer}")


def read_texts(texts: Sequence[str]) -> dict[str, Salient]:
    """The entities of each text: what ``learn`` takes, computed on any thread."""
    return {text: salient(text) for text in texts}


@dataclass(frozen=True, slots=True)
class Coverage:
    """What an answer and the questions it answers name, for the guard to find a name
    or id of the message in: as an entity, as a Latin word, or in the text."""

    ids: frozenset[str]
    names: frozenset[str]
    places: frozenset[str]
    words: frozenset[str]
    text: str  # folded and casefolded, one text a line: every question and answer, sorted


class AnswerGroup:
    """One answer and the FAQ entries that share it (phrasings of one question)."""

    def __init__(self, vectors: WordVectors) -> None:
        self.entries: dict[str, KbEntry] = {}
        # An answer's few dozen words are stacked on use and kept only while the answer is
        # among the recently used: thousands of answers would each hold a copy of their rows.
        self.vocabulary = Vocabulary(vectors, keep_rows=False)
        self._facts: dict[str, Salient] = {}  # a question or the answer -> its entities
        self._coverage: Coverage | None = None

    @classmethod
    def of(cls, entry: KbEntry, phrasings: Sequence[str], embedder: Embedder) -> AnswerGroup:
        """A group of its own: the entry, and its answer under other questions."""
        group = cls(WordVectors(embedder))
        for member in [entry, *(KbEntry.make(q, entry.answer) for q in phrasings)]:
            group.add(member, entry_words(member))
        return group

    def add(self, entry: KbEntry, words: Sequence[str]) -> None:
        self.entries[entry.id] = entry
        self.vocabulary.add(words)
        self._coverage = None

    def remove(self, entry: KbEntry, words: Sequence[str]) -> None:
        del self.entries[entry.id]
        self.vocabulary.remove(words)
        self._coverage = None
        self._facts.pop(entry.question, None)  # a question is one entry's: ids are its digest
        if all(other.answer != entry.answer for other in self.entries.values()):
            self._facts.pop(entry.answer, None)

    def __bool__(self) -> bool:
        return bool(self.entries)

    def _texts(self) -> list[str]:
        answers = dict.fromkeys(entry.answer for entry in self.entries.values())
        return [*(entry.question for entry in self.entries.values()), *answers]

    def unread(self) -> list[str]:
        return [text for text in self._texts() if text not in self._facts]

    def learn(self, facts: Mapping[str, Salient]) -> bool:
        """Keep what ``read_texts`` found of this group's texts (others were removed
        meanwhile); whether every text is read now."""
        done = True
        for text in self.unread():
            if text in facts:
                self._facts[text] = facts[text]
            else:
                done = False
        return done

    def _facts_of(self, text: str) -> Salient:
        found = self._facts.get(text)
        if found is None:
            found = self._facts[text] = salient(text)
        return found

    def phrasings(self, entry: KbEntry) -> list[str]:
        """The questions of the other entries."""
        return [other.question for other in self.entries.values() if other.id != entry.id]

    def questions(self, entry: KbEntry) -> list[Salient]:
        """The entities of the entry's question, then of each other entry's."""
        return [self._facts_of(q) for q in (entry.question, *self.phrasings(entry))]

    @property
    def coverage(self) -> Coverage:
        if self._coverage is None:
            texts = self._texts()
            facts = [self._facts_of(text) for text in texts]
            self._coverage = Coverage(
                ids=frozenset().union(*(found.ids for found in facts)),
                names=frozenset().union(*(found.names for found in facts)),
                places=frozenset().union(*(found.places for found in facts)),
                words=frozenset().union(*(found.words for found in facts)),
                # A line a text: a phrase is not found across two of them.
                text="\n".join(sorted(fold(text) for text in texts)).casefold(),
            )
        return self._coverage


class KbWords:
    """The whole knowledge base's vocabulary, each answer's group, and the products of
    the ``CATALOGUE`` entries."""

    def __init__(self, embedder: Embedder) -> None:
        self._vectors = WordVectors(embedder)
        self.vocabulary = Vocabulary(self._vectors)
        self.catalogue = Vocabulary(self._vectors)
        self._entry_words: dict[str, list[str]] = {}
        self._products: dict[str, list[str]] = {}  # catalogue entry id -> its products
        self._answers: dict[str, AnswerGroup] = {}  # answer_key -> its group
        self._unread: set[str] = set()  # the keys of groups with a text not read ahead

    def add(self, entry: KbEntry, words: list[str] | None = None) -> None:
        """``words`` are ``entry_words(entry)`` when already computed."""
        words = entry_words(entry) if words is None else words
        self._entry_words[entry.id] = words
        self.vocabulary.add(words)
        if is_catalogue(entry):
            products = self._products[entry.id] = catalogue_products(entry.answer)
            self.catalogue.add(products)
        if entry.kind == "faq":
            key = answer_key(entry.answer)
            group = self._answers.get(key)
            if group is None:
                group = self._answers[key] = AnswerGroup(self._vectors)
            group.add(entry, words)
            self._unread.add(key)

    def words_of(self, entry: KbEntry) -> list[str] | None:
        """The words kept for an entry in the knowledge base (None for another)."""
        return self._entry_words.get(entry.id)

    def remove(self, entry: KbEntry) -> None:
        words = self._entry_words.pop(entry.id, [])
        self.vocabulary.remove(words)
        self.catalogue.remove(self._products.pop(entry.id, []))
        for word in set(words):
            if word not in self.vocabulary:
                self._vectors.forget(word)
        key = answer_key(entry.answer)
        group = self._answers.get(key)
        if group is not None and entry.id in group.entries:
            group.remove(entry, words)
            if not group:
                del self._answers[key]
                self._unread.discard(key)

    def answer(self, entry: KbEntry) -> AnswerGroup:
        """The group of an FAQ entry of this knowledge base (the fast path's hits are:
        it searches and changes the knowledge base under one lock)."""
        group = self._answers[answer_key(entry.answer)]
        if entry.id not in group.entries:
            raise KeyError(f"{entry.id} is not an FAQ entry of the knowledge base")
        return group

    def unread(self, limit: int) -> list[str]:
        """Up to ``limit`` texts whose entities the groups have not read yet."""
        texts: list[str] = []
        for key in list(self._unread):
            if len(texts) >= limit:
                break
            unread = self._answers[key].unread()
            if not unread:  # a customer's message got there first
                self._unread.discard(key)
            texts += unread
        return texts[:limit]

    def learn(self, facts: Mapping[str, Salient]) -> None:
        for key in list(self._unread):
            if self._answers[key].learn(facts):
                self._unread.discard(key)

    def prepare(self) -> None:
        """Build the knowledge base's nearness matrix now, not in a customer's request."""
        self.vocabulary.prepare()
