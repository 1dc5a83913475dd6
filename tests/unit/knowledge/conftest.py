"""Fixtures for the knowledge-base tests: the real embedder, counted."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

from kefu.knowledge.base import KnowledgeBase
from kefu.knowledge.embedder import StaticEmbedder, Vectors
from kefu.knowledge.entries import KbEntry


class CountingEmbedder:
    """The real model, counting the passages it embeds (to prove vectors are reused)."""

    def __init__(self, inner: StaticEmbedder) -> None:
        self.inner = inner
        self.passages = 0

    @property
    def dim(self) -> int:
        return self.inner.dim

    @property
    def name(self) -> str:
        return self.inner.name

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        self.passages += len(texts)
        return self.inner.embed_passages(texts)


class HashEmbedder:
    """Random unit vectors seeded by the text: for tests about bookkeeping, not meaning."""

    dim = 384
    name = "hash"

    def _embed(self, texts: Sequence[str]) -> Vectors:
        rows = [
            np.random.default_rng(list(text.encode())).standard_normal(self.dim) for text in texts
        ]
        matrix = np.array(rows, dtype=np.float32).reshape(len(texts), self.dim)
        return np.asarray(matrix / np.linalg.norm(matrix, axis=1, keepdims=True), np.float32)

    def embed_queries(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts)

    def embed_passages(self, texts: Sequence[str]) -> Vectors:
        return self._embed(texts)


@pytest.fixture
def embedder(static_embedder: StaticEmbedder) -> CountingEmbedder:
    return CountingEmbedder(static_embedder)


@pytest.fixture
def kb(tmp_path: Path, embedder: CountingEmbedder) -> Iterator[KnowledgeBase]:
    base = KnowledgeBase.open(tmp_path / "knowledge.db", embedder)
    yield base
    base.close()


SHOP = [
    ("How long does delivery take?", "Delivery takes 2-4 business days.", "shipping"),
    ("How much does shipping cost?", "Shipping costs SGD 6.90, free over SGD 80.", "shipping"),
    ("How do I start a return?", "Open your order and press Return within 30 days.", "returns"),
    ("How do I reset my password?", "Use the Forgot password link on the login page.", "account"),
    ("下单后多久能收到货？", "新加坡境内一般2-4个工作日送达。", "物流"),
    ("怎么申请退货？", "在订单页面点击退货，30天内都可以申请。", "退货"),
    ("忘记密码了怎么办？", "在登录页点击忘记密码，按邮件提示重置。", "账户"),
]


def shop_entries(source: str = "shop.csv") -> list[KbEntry]:
    return [KbEntry.make(q, a, category=c, source=source) for q, a, c in SHOP]
