"""The second look: multilingual-e5-small's nearest answer to a message and its leads.
The index's bookkeeping runs on a counting wrapper of the real model."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from kefu import demo
from kefu.knowledge.embedder import Vectors
from kefu.knowledge.second_look import (
    E5Transformer,
    Known,
    Nearest,
    SecondLook,
    sentences,
)

RETURNS = "Go to My Orders and click Return within 30 days."
SHOWROOM = "Our showroom is at 18 Tai Seng Street, open 10:00-21:00."
DAMAGE = "Send us a photo within 7 days and we replace it."
ROWS = [
    Known.faq("r1", "What is your returns policy, please?", RETURNS),
    Known.faq("r2", "can i return a mattress at all", RETURNS),
    Known.faq("s1", "Where is your showroom, please?", SHOWROOM),
    Known.faq("s2", "请问展厅在哪里？", SHOWROOM),
    Known.faq("d1", "My item arrived damaged, what now?", DAMAGE),
    Known.faq("d2", "收到的桌子腿断了", DAMAGE),
]
CATALOGUE = Known.passage(
    "c1",
    "What we sell",
    "We sell furniture and lighting. Bathroom: towels, bath mats and mirrors.\n"
    "Kids' rooms: children's beds, desks and storage.",
)


class CountingTransformer:
    """The real model, counting the texts it embeds (to prove vectors are kept)."""

    def __init__(self, inner: E5Transformer, name: str | None = None) -> None:
        self.inner = inner
        self._name = name or inner.name
        self.texts = 0
        self.answers = 0

    @property
    def name(self) -> str:
        return self._name

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        self.texts += len(texts)
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        self.answers += len(texts)
        return self.inner.embed_passages(texts)


@pytest.fixture(scope="module")
def e5() -> E5Transformer:
    return E5Transformer()


@pytest.fixture
def look(e5: E5Transformer, tmp_path: Path) -> SecondLook:
    second_look = SecondLook(CountingTransformer(e5), tmp_path / "vectors.npz")
    assert second_look.sync(ROWS, limit=100) == 0
    return second_look


def nearest(look: SecondLook, message: str) -> Nearest:
    found = look.nearest(look.model.embed_queries([message])[0])
    assert found is not None
    return found


def test_the_nearest_answer_and_its_lead(look: SecondLook) -> None:
    found = nearest(look, "the mattress feels too soft, can I return it?")
    assert found.entry_id in {"r1", "r2"}
    assert found.margin > 0
    assert nearest(look, "椅子腿断了，刚拆箱").entry_id in {"d1", "d2"}
    # Its phrasings held out, the answer is found by no question of its own.
    other = look.nearest(
        look.model.embed_queries(["can i return a mattress"])[0], frozenset({"r1", "r2"})
    )
    assert other is not None
    assert other.entry_id not in {"r1", "r2"}


def test_no_answer_without_two_to_choose_between(e5: E5Transformer, tmp_path: Path) -> None:
    empty = SecondLook(e5, tmp_path / "none.npz")
    empty.sync([], limit=100)
    assert empty.nearest(e5.embed_queries(["can I return it?"])[0]) is None


def test_a_question_nearer_a_passage_leads_it_by_less(e5: E5Transformer, tmp_path: Path) -> None:
    look = SecondLook(e5, tmp_path / "vectors.npz")
    look.sync(ROWS, limit=100)
    message = "Do you have mirrors for the bathroom?"
    look.sync([*ROWS, CATALOGUE], limit=100)
    assert nearest(look, message).over_context < 0.05  # the catalogue's sentence is nearer
    assert nearest(look, "the mattress feels too soft, can I return it?").over_context > 0


def test_a_passage_is_matched_by_its_heading_and_sentences() -> None:
    assert CATALOGUE.texts == (
        "What we sell",
        "We sell furniture and lighting.",
        "Bathroom: towels, bath mats and mirrors.",
        "Kids' rooms: children's beds, desks and storage.",
    )
    parts = sentences("退货要7天。换货呢？- 一行\n\n# 标题")
    assert parts == ["退货要7天。", "换货呢？", "一行", "标题"]


def test_an_edited_passage_is_embedded_again(e5: E5Transformer, tmp_path: Path) -> None:
    model = CountingTransformer(e5)
    look = SecondLook(model, tmp_path / "vectors.npz")
    look.sync([*ROWS, CATALOGUE], limit=100)
    before = model.texts
    edited = Known.passage("c1", "What we sell", "We sell rugs.")
    look.sync([*ROWS, edited], limit=100)
    assert model.texts == before + 2


def test_vectors_are_kept_across_restarts_and_follow_the_knowledge_base(
    e5: E5Transformer, tmp_path: Path
) -> None:
    store = tmp_path / "vectors.npz"
    model = CountingTransformer(e5)
    first = SecondLook(model, store)
    # A round embeds up to 4 texts: r1, r2 and their answer; s1, s2 and theirs; d1, d2...
    assert first.sync(ROWS, limit=4) == 4
    assert first.sync(ROWS, limit=4) == 2
    assert first.sync(ROWS, limit=4) == 0
    assert model.texts == len(ROWS)
    assert model.answers == 3  # once per answer, not per phrasing

    again = CountingTransformer(e5)
    restarted = SecondLook(again, store)
    restarted.sync(ROWS[:-1], limit=100)  # d2 was removed meanwhile
    assert again.texts == again.answers == 0
    with np.load(store) as saved:
        assert list(saved["counts"]) == [1] * (len(ROWS) - 1)
        assert saved["answers"].shape[0] == 3  # d1 still answers DAMAGE
    restarted.sync(ROWS[:2], limit=100)
    with np.load(store) as saved:
        assert saved["answers"].shape[0] == 1  # the answers nothing asks any more are gone

    other = CountingTransformer(e5, name="another model")
    SecondLook(other, store).sync(ROWS, limit=100)
    assert other.texts == len(ROWS)  # another model's vectors are not this one's


def test_a_torn_file_is_embedded_again(e5: E5Transformer, tmp_path: Path) -> None:
    store = tmp_path / "vectors.npz"
    store.write_bytes(b"not an npz file")
    model = CountingTransformer(e5)
    SecondLook(model, store).sync(ROWS, limit=100)
    assert model.texts == len(ROWS)
    assert store.stat().st_size > 1000


def test_the_demo_ships_embedded(e5: E5Transformer, tmp_path: Path) -> None:

    rows = [Known.of(entry) for entry in demo.entries()]
    model = CountingTransformer(e5)
    SecondLook(model, tmp_path / "vectors.npz", demo.VECTORS).sync(rows, limit=len(rows))
    # scripts/embed-demo is up to date with the demo's files
    assert model.texts == model.answers == 0


def test_the_answer_read_as_a_passage_is_a_second_opinion(look: SecondLook) -> None:
    def nearest(message: str) -> Nearest:
        found = look.nearest(look.model.embed_queries([message])[0])
        assert found is not None
        return found

    agreed = nearest("click Return in My Orders")
    assert agreed.entry_id in {"r1", "r2"}
    assert agreed.answer_margin > 0  # the returns answer reads nearest too
    assert 0 < agreed.answer_similarity <= 1
    # The nearest question is about returns; what the message asks is in the damage
    # answer ("send us a photo within 7 days"), which reads nearer than the returns one.
    disputed = nearest("how many days do I have to send a photo")
    assert disputed.entry_id in {"r1", "r2"}
    assert disputed.answer_margin < 0


def test_a_file_from_before_answers_were_embedded_is_completed(
    e5: E5Transformer, tmp_path: Path
) -> None:
    store = tmp_path / "vectors.npz"
    SecondLook(e5, store).sync(ROWS, limit=100)
    with np.load(store) as saved:
        old = {key: saved[key] for key in ("model", "keys", "counts", "vectors")}
    np.savez(store, **old)  # the questions only, as a data dir of the last release has
    model = CountingTransformer(e5)
    look = SecondLook(model, store)
    assert look.sync(ROWS, limit=100) == 0
    assert (model.texts, model.answers) == (0, 3)  # only the answers are embedded
    assert nearest(look, "the mattress feels too soft, can I return it?").answer_similarity > 0
