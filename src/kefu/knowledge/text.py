"""Text normalisation and tokenising shared by retrieval, the cache and the router.

Chinese has no spaces, so a CJK run becomes its characters and their bigrams
(the usual lexical-retrieval choice when a segmenter such as jieba is not
wanted: no dictionary to load, no segmentation errors on shop vocabulary).
Latin text becomes lowercased words; digits stay whole so "LH-100234" and
"30 days" keep their meaning.
"""

from __future__ import annotations

import re
import unicodedata

# CJK unified ideographs (incl. extension A) and compatibility ideographs.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_CJK_RUN = re.compile(f"[{_CJK}]+")
_TOKEN = re.compile(f"[{_CJK}]+|[^\\W_]+(?:['\u2019][^\\W_]+)*", re.UNICODE)
_SPACES = re.compile(r"\s+")
# Punctuation that ends or decorates a question without changing it.
_EDGE_PUNCT = " \t\n.,!?;:~…。，！？；：、\"'\u201c\u201d\u2018\u2019()（）[]【】"


def has_cjk(text: str) -> bool:
    return _CJK_RUN.search(text) is not None


def language(text: str) -> str:
    """'zh' when the text has any Chinese, else 'en' (the two languages kefu ships for)."""
    return "zh" if has_cjk(text) else "en"


def normalize(text: str) -> str:
    """The form two messages share when they ask the same thing in the same words.

    NFKC folds full-width letters, digits and commas into ASCII; case, runs of
    spaces and punctuation at the edges do not change a question.
    """
    folded = unicodedata.normalize("NFKC", text).casefold()
    return _SPACES.sub(" ", folded).strip(_EDGE_PUNCT)


def tokens(text: str) -> list[str]:
    """Lexical tokens: Latin words and numbers whole, CJK as characters plus bigrams."""
    out: list[str] = []
    for match in _TOKEN.finditer(normalize(text)):
        word = match.group()
        if _CJK_RUN.fullmatch(word):
            out.extend(word)
            out.extend(word[i : i + 2] for i in range(len(word) - 1))
        else:
            out.append(word.replace("\u2019", "'"))
    return out
