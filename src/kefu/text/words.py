"""Words and tokens of a text, for retrieval, the cache and the FAQ guard.

Two ways to cut Chinese, each where it serves best:

- ``tokens`` (BM25, which stems the Latin ones: ``bm25.terms_of``): a CJK run
  becomes its characters and their bigrams, which never miss a shop's own vocabulary;
- ``words_of`` (the embedder, the FAQ guard's unfamiliar words): jieba's
  dictionary words (no HMM guessing, so every word is a dictionary word), since
  a word means something its characters do not (微信 is neither 微 nor 信).

Latin text becomes lowercased words; digits stay whole so "AC-100234" and
"30 days" keep their meaning.
"""

from __future__ import annotations

import functools
import logging
import re
import threading
import warnings
from typing import Any

from kefu.text.normalize import normalize

# CJK unified ideographs (incl. extension A) and compatibility ideographs.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_WORD = re.compile(f"[{_CJK}]+|[^\\W_{_CJK}]+(?:'[^\\W_{_CJK}]+)*")
_SEGMENTER_LOCK = threading.Lock()
_segmenter: Any = None
_SCRIPT_EDGE = re.compile(f"(?<=[{_CJK}])(?=[A-Za-z0-9])|(?<=[A-Za-z0-9])(?=[{_CJK}])")


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def language(text: str) -> str:
    """'zh' when the text has any Chinese, else 'en' (the two languages kefu ships for)."""
    return "zh" if has_cjk(text) else "en"


def space_scripts(text: str) -> str:
    """A space wherever Chinese meets Latin letters or digits: a CJK character is a word
    character to ``re``, so "订单AC-100234" has no \\b before the L without one."""
    return _SCRIPT_EDGE.sub(" ", text)


def tokens(text: str) -> list[str]:
    """Lexical tokens: Latin words and numbers whole, CJK as characters plus bigrams."""
    return tokens_of_words(runs_of_normal(normalize(text)))


def tokens_of_words(runs: list[str]) -> list[str]:
    """``tokens`` of a text's ``runs_of_normal``."""
    out: list[str] = []
    for word in runs:
        if is_cjk_word(word):
            out.extend(word)
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            out.append(word)
    return out


def runs_of_normal(normal: str) -> list[str]:
    """Runs of Chinese characters and Latin words (apostrophes kept: "order's") of a
    text's ``normalize`` form; a Latin word never runs into Chinese ("PO Box吗" is
    "po", "box", "吗")."""
    return _WORD.findall(normal)


def is_cjk_word(word: str) -> bool:
    return _CJK_RUN.fullmatch(word) is not None


def _jieba() -> Any:
    """jieba's tokenizer, loaded once per process: its dictionary is read-only once
    loaded (safe from any thread) and takes ~0.85 s to load (jieba caches it on disk)."""
    global _segmenter  # one read-only dictionary per process, like an imported module
    if _segmenter is not None:
        return _segmenter
    with _SEGMENTER_LOCK:
        if _segmenter is None:
            with warnings.catch_warnings():
                # jieba 0.42 imports pkg_resources, which setuptools deprecates (as a
                # DeprecationWarning or, in newer releases, a UserWarning).
                warnings.simplefilter("ignore")
                import jieba

            jieba.setLogLevel(logging.WARNING)
            tokenizer = jieba.Tokenizer()
            tokenizer.initialize()
            _segmenter = tokenizer
    return _segmenter


def load_segmenter() -> None:
    """Load the Chinese dictionary now, not in a customer's first request."""
    _jieba()


@functools.lru_cache(maxsize=4096)
def segment(run: str) -> tuple[str, ...]:
    """A run of Chinese characters as dictionary words. Memoised: a message is cut for
    its vector and again for the FAQ guard, and its words again one by one."""
    return tuple(w for w in _jieba().lcut(run, HMM=False) if w.strip())


def words_of(text: str, *, with_characters: bool = False) -> list[str]:
    """Case-folded Latin words and numbers, and Chinese dictionary words;
    ``with_characters`` also keeps the characters of each Chinese word."""
    return words_of_runs(runs_of_normal(normalize(text)), with_characters=with_characters)


def words_of_runs(runs: list[str], *, with_characters: bool = False) -> list[str]:
    """``words_of`` a text's ``runs_of_normal``."""
    out: list[str] = []
    for word in runs:
        if is_cjk_word(word):
            parts = segment(word)
            out.extend(parts)
            if with_characters:
                out.extend(c for c in word if c not in parts)
        else:
            out.append(word.removesuffix("'s"))  # the order's ~ the order
    return out
