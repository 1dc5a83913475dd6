"""The words a knowledge base uses, and how near an unknown word comes to them.

The FAQ guard asks of every content word of a message: does the shop talk about
this? A word the knowledge base uses is familiar; so is a near synonym of one
(quantity ~ large orders, 蓝色 ~ 灰色), which is where the static word vectors
help: "gym", "router" or 微信 come near no word a furniture shop uses.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from kefu.knowledge.embedder import Embedder
from kefu.knowledge.text import words_of


class Vocabulary:
    def __init__(self, texts: Iterable[str], embedder: Embedder) -> None:
        words = {word for text in texts for word in words_of(text)}
        self._words = frozenset(words)
        self._embedder = embedder
        vectors = embedder.embed_queries(sorted(words))
        known = np.linalg.norm(vectors, axis=1) > 0  # words outside the embedder's table
        self._vectors = vectors[known]

    def __contains__(self, word: str) -> bool:
        return word in self._words

    def __len__(self) -> int:
        return len(self._words)

    def nearness(self, word: str) -> float:
        """The cosine between the word and the nearest word the knowledge base uses
        (0 for a word the embedder does not know)."""
        if not len(self._vectors):
            return 0.0
        vector = self._embedder.embed_queries([word])[0]
        return float(np.max(self._vectors @ vector))
