"""The one text normaliser: what every reader of a message (rules, entities, words,
exact matches) reads, so a message and its phone-typed twin read the same.

``fold`` keeps case (names and shouting are read from it) and changes only what a
keyboard changes without the customer meaning anything by it:

- NFKC: full-width letters, digits and ASCII punctuation (a Chinese keyboard's),
  the ideographic space and the non-breaking space become their plain forms;
- curly quotes and apostrophes (phones type a right single quote in "Where's"),
  hyphens and minus signs that autocorrect made typographic, and the ideographic
  full stop (。, the . key of a Chinese keyboard, 3。5 for 3.5 too) become ASCII (the
  enumeration comma 、 is a mark of its own, "1、2、3" is no number 1,2,3);
- invisible characters (zero-width spaces and joiners, a byte-order mark) go;
- every run of whitespace is one space, none at the edges.

``normalize`` is the form two messages share when they ask the same thing in the same words:
``fold``, case folded, without the punctuation at its edges.
"""

from __future__ import annotations

import re
import unicodedata

_TYPOGRAPHIC = str.maketrans(
    {
        "\u2018": "'",  # left single quote
        "\u2019": "'",  # right single quote (the apostrophe phones type)
        "\u201a": "'",  # single low-9 quote
        "\u201b": "'",  # single high-reversed-9 quote
        "\u2032": "'",  # prime
        "\u00b4": "'",  # acute accent
        "\u201c": '"',  # left double quote
        "\u201d": '"',  # right double quote
        "\u201e": '"',  # double low-9 quote
        "\u201f": '"',  # double high-reversed-9 quote
        "\u2033": '"',  # double prime
        "\u2010": "-",  # hyphen
        "\u2011": "-",  # non-breaking hyphen
        "\u2012": "-",  # figure dash
        "\u2013": "-",  # en dash (autocorrect between digits)
        "\u2212": "-",  # minus sign
        "\u3002": ".",  # ideographic full stop
        "\uff61": ".",  # half-width ideographic full stop
        "\u200b": None,  # zero-width space
        "\u200c": None,  # zero-width non-joiner
        "\u200d": None,  # zero-width joiner
        "\u2060": None,  # word joiner
        "\ufeff": None,  # byte-order mark / zero-width no-break space
    }
)
_SPACES = re.compile(r"\s+")
# Punctuation that ends or decorates a question without changing it (after ``fold``:
# the Chinese forms NFKC leaves are those of brackets).
_EDGE_PUNCT = " .,!?;:~…、\"'()[]【】《》「」『』"


def fold(text: str) -> str:
    """The message as a phone, a Chinese keyboard or a desktop would all have typed it
    (case kept)."""
    # The table first: NFKC would make an acute accent a space and a combining accent.
    folded = unicodedata.normalize("NFKC", text.translate(_TYPOGRAPHIC))
    return _SPACES.sub(" ", folded).strip()


def normalize_folded(folded: str) -> str:
    """``normalize`` of a text that is ``fold``'s output already."""
    return folded.casefold().strip(_EDGE_PUNCT)


def normalize(text: str) -> str:
    """The form two messages share when they ask the same thing in the same words: case,
    runs of spaces and punctuation at the edges do not change a question."""
    return normalize_folded(fold(text))
