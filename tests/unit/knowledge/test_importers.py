"""Every way a knowledge file can be wrong gets a message naming the file and the line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kefu.errors import InvalidRequest
from kefu.knowledge.entries import entry_id
from kefu.knowledge.importers import KbImportError, parse_bytes, parse_file


def csv_bytes(*lines: str) -> bytes:
    return ("\n".join(lines) + "\n").encode()


def test_csv_with_category_and_quoted_multiline_answer() -> None:
    entries = parse_bytes(
        csv_bytes(
            "Question,Answer,Category",
            'How long does delivery take?,"2-4 days,\nusually",shipping',
            "怎么申请退货？,在订单页面点击退货。,",
        ),
        "shop.csv",
    )
    assert [e.question for e in entries] == ["How long does delivery take?", "怎么申请退货？"]
    assert entries[0].answer == "2-4 days,\nusually"
    assert (entries[0].category, entries[1].category) == ("shipping", None)
    assert (entries[0].lang, entries[1].lang) == ("en", "zh")
    assert {e.kind for e in entries} == {"faq"}
    assert {e.source for e in entries} == {"shop.csv"}
    assert entries[0].id == entry_id("how long does delivery take")


def test_csv_columns_in_any_order_and_bom() -> None:
    data = b"\xef\xbb\xbf" + csv_bytes("answer,question", "Two days.,How long?")
    [entry] = parse_bytes(data, "x.csv")
    assert (entry.question, entry.answer) == ("How long?", "Two days.")


def test_import_error_is_a_400() -> None:
    assert issubclass(KbImportError, InvalidRequest)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (csv_bytes("q,a", "x,y"), "shop.csv line 1: header is 'q,a'; expected the columns"),
        (csv_bytes("question,answer,price", "x,y,1"), "shop.csv line 1: header"),
        (csv_bytes("question"), "shop.csv line 1: header"),
        (b"", "shop.csv: the file is empty"),
        (b"\n  \n", "shop.csv: the file is empty"),
        (csv_bytes("question,answer"), "shop.csv: no entries found"),
        (csv_bytes("question,answer", "a?,b", "", "c?,  "), "shop.csv line 4: empty answer"),
        (csv_bytes("question,answer", " ,b"), "shop.csv line 2: empty question"),
        (csv_bytes("question,answer", "a?,b,c"), "shop.csv line 2: 3 fields, the header has 2"),
        (
            csv_bytes("question,answer", "How long?,x", '"multi\nline?",y', "how  LONG,z"),
            "shop.csv line 5: duplicate question 'how  LONG' (first at line 2)",
        ),
    ],
)
def test_csv_errors(data: bytes, message: str) -> None:
    with pytest.raises(KbImportError) as caught:
        parse_bytes(data, "shop.csv")
    assert caught.value.message.startswith(message)


def test_bad_encoding_names_the_line() -> None:
    data = csv_bytes("question,answer", "a?,b") + "c?,价格".encode("gbk") + b"\n"
    with pytest.raises(KbImportError, match=r"^shop\.csv line 3: not valid UTF-8"):
        parse_bytes(data, "shop.csv")


def test_unknown_suffix() -> None:
    with pytest.raises(KbImportError, match=r"unsupported file type '\.txt'"):
        parse_bytes(b"x", "faq.txt")


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(KbImportError, match="cannot read"):
        parse_file(tmp_path / "nope.csv")


def test_json_list_and_entries_object(tmp_path: Path) -> None:
    items = [
        {"question": "How long?", "answer": "Two days.", "category": "shipping"},
        {"question": "Store hours", "answer": "9 to 5.", "kind": "passage"},
    ]
    path = tmp_path / "faq.json"
    path.write_text(json.dumps({"entries": items}))
    entries = parse_file(path)
    assert [(e.kind, e.category) for e in entries] == [("faq", "shipping"), ("passage", None)]
    again = parse_bytes(json.dumps(items).encode(), "faq.json")
    assert [e.id for e in again] == [e.id for e in entries]
    assert all(a.same_content(b) for a, b in zip(again, entries, strict=True))


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([{"question": "a?", "answer": "b"}, {"question": 3, "answer": "b"}], "item 2: question"),
        ([{"question": "a?", "answer": "b"}, "x"], "item 2: expected an object"),
        ([{"question": "a?", "answer": "b", "price": 1}], "item 1: unknown key 'price'"),
        ([{"question": "a?"}], "item 1: empty answer"),
        ([{"question": "a?", "answer": "b", "kind": "poem"}], "item 1: kind is 'poem'"),
        ({"faq": []}, "expected a JSON list"),
        ([], "no entries found"),
    ],
)
def test_json_errors(document: object, message: str) -> None:
    with pytest.raises(KbImportError, match=f"^faq.json.*{message}"):
        parse_bytes(json.dumps(document).encode(), "faq.json")


def test_json_syntax_error_names_the_line() -> None:
    with pytest.raises(KbImportError, match=r"^faq\.json line 3: invalid JSON"):
        parse_bytes(b'[\n{"question": "a?", "answer": "b"},\n{oops}\n]', "faq.json")


def test_jsonl() -> None:
    data = b'{"question": "a?", "answer": "b"}\n\n{"question": "c?", "answer": "d"}\n'
    assert [e.question for e in parse_bytes(data, "faq.jsonl")] == ["a?", "c?"]
    with pytest.raises(KbImportError, match=r"^faq\.jsonl line 3: answer must be text"):
        parse_bytes(
            b'{"question": "a?", "answer": "b"}\n\n{"question": "c?", "answer": 1}', "faq.jsonl"
        )
    with pytest.raises(KbImportError, match=r"^faq\.jsonl line 2: invalid JSON"):
        parse_bytes(b'{"question": "a?", "answer": "b"}\n{"question"\n', "faq.jsonl")


MARKDOWN = """\
# Shop help

## Shipping

### How long does delivery take?
Two to four business days.

```
# not a heading
```

### Do you ship abroad？
Yes, to nine countries.

## Returns policy
Thirty days, unused, with the receipt.
"""


def test_markdown_questions_passages_and_categories() -> None:
    entries = parse_bytes(MARKDOWN.encode(), "help.md")
    got = [(e.kind, e.question, e.category) for e in entries]
    assert got == [
        ("faq", "How long does delivery take?", "Shipping"),
        ("faq", "Do you ship abroad？", "Shipping"),
        ("passage", "Returns policy", "Shop help"),
    ]
    assert entries[0].answer == "Two to four business days.\n\n```\n# not a heading\n```"


def test_markdown_errors() -> None:
    with pytest.raises(KbImportError, match=r"^notes\.md: no Markdown headings"):
        parse_bytes(b"just some text\nand more\n", "notes.md")
    with pytest.raises(KbImportError, match=r"^notes\.md line 3: empty answer"):
        parse_bytes(b"# Title\ntext\n## Why?\n## Next\nbody\n", "notes.md")
    with pytest.raises(
        KbImportError, match=r"line 5: duplicate question 'why\?' \(first at line 1\)"
    ):
        parse_bytes(b"# Why?\nA.\n\ntext\n## why?\nB.\n", "notes.markdown")
