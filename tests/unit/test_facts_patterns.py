"""The fact readers' patterns cost time linear in a message's length, by their shape: no
timings here. The e-mail pattern bounds every repeat; a clause separator is tried only
where its run begins."""

from __future__ import annotations

import re

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from kefu import demo
from kefu.engine.base import ChatMessage
from kefu.memory.facts import _CLAUSE, EMAIL, merge_facts

# The patterns as they were: the same matches within the bounds, in quadratic time.
PLAIN_EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+(?:\.[\w-]+)+\b")
PLAIN_CLAUSE = re.compile(r"[,;.!?\n，。；！？、]+(?:\s+|$)|\s+(?:and|or)\s+")


def emails(text: str) -> list[str]:
    found = merge_facts(
        {},
        [ChatMessage("user", text)],
        order_pattern=demo.ORDER_PATTERN,
        order_example=demo.ORDER_EXAMPLE,
    )
    return found.get("emails", [])


def test_every_repeat_of_the_email_pattern_is_bounded(capsys: pytest.CaptureFixture[str]) -> None:
    # re.DEBUG prints the parsed pattern: an unbounded repeat (+, *, {n,}) reads MAXREPEAT.
    # Bounded, an attempt reads a bounded stretch past where it starts.
    re.compile(EMAIL.pattern, EMAIL.flags | re.DEBUG)
    tree = capsys.readouterr().out
    assert "MAX_REPEAT" in tree
    assert "MAXREPEAT" not in tree


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("mail me at ann@example.com, thanks", ["ann@example.com"]),
        ("first.last+tag@mail.example.co.uk.", ["first.last+tag@mail.example.co.uk"]),
        ("a-b@c-d.e then x_y@z.org", ["a-b@c-d.e", "x_y@z.org"]),
        ("me@localhost or @example.com or ann@", []),
        ("a." * 5_000, []),  # every character a word boundary, no @
        ("a-" * 5_000 + "a@", []),
        # a local part is at most 64 characters (RFC 5321): the last 64 are read
        ("a." * 5_000 + "@example.com", ["a." * 32 + "@example.com"]),
        ("x@" + "a." * 5_000, ["x@" + "a." * 8 + "a"]),  # at most nine labels
    ],
    ids=["plain", "subdomains", "two", "none", "dots", "dashes", "long-local", "long-domain"],
)
def test_emails_are_read_whatever_surrounds_them(text: str, found: list[str]) -> None:
    assert emails(text) == found


@settings(max_examples=500, derandomize=True, database=None, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b.", "@", "-", "+", " ", "ann", ".com", "é", "_"]), max_size=12)
)
def test_emails_within_the_bounds_are_read_as_the_plain_pattern_does(pieces: list[str]) -> None:
    text = "".join(pieces)  # at most 48 characters: no part near 64
    assume(text.count(".") <= 8)  # nine labels at most
    assert EMAIL.findall(text) == PLAIN_EMAIL.findall(text)


@pytest.mark.parametrize(
    ("text", "run_start", "inside"),
    [(" " * 100 + "and x", 0, 1), (",,,,\n" * 3 + "x", 0, 2), ("x" + "。" * 50 + " y", 1, 5)],
    ids=["spaces", "commas-and-newlines", "full-stops"],
)
def test_a_clause_separator_is_tried_only_where_its_run_begins(
    text: str, run_start: int, inside: int
) -> None:
    # Inside a run an attempt stops at its first character (the lookbehind), so each run
    # is read once; the plain pattern's attempts at every character each read to its end.
    assert _CLAUSE.match(text, run_start) is not None
    assert PLAIN_CLAUSE.match(text, inside) is not None
    assert _CLAUSE.match(text, inside) is None


SEPARATORS = [" ", "\t", "\n", "\r", "\u3000", ",", ".", "!", "。", "，", "、", "and", "or"]


@settings(max_examples=500, derandomize=True, database=None, deadline=None)
@given(st.lists(st.sampled_from([*SEPARATORS, "a", "x", "LH100234"]), max_size=30))
def test_clauses_split_as_the_plain_pattern_does(pieces: list[str]) -> None:
    text = "".join(pieces)
    assert _CLAUSE.split(text) == PLAIN_CLAUSE.split(text)


@pytest.mark.parametrize(
    "text",
    [" " * 2_000 + "x", "," * 2_000 + "x", "\t" * 2_000 + "and" + " " * 2_000],
    ids=["spaces", "commas", "tabs-and"],
)
def test_long_runs_split_as_the_plain_pattern_does(text: str) -> None:
    assert _CLAUSE.split(text) == PLAIN_CLAUSE.split(text)
