"""Read a knowledge file (CSV, JSON, JSONL, Markdown) into entries, or say exactly what is wrong.

Parsing is all-or-nothing: the whole file is checked before anything is
written, so a bad line never leaves half a file in the knowledge base. Every
message names the file and the line (or JSON item) a shop owner must fix.
"""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kefu.errors import InvalidRequest
from kefu.knowledge.entries import KINDS, KbEntry, Kind
from kefu.text.normalize import normalize

SUFFIXES = (".csv", ".json", ".jsonl", ".md", ".markdown")
CSV_COLUMNS = ("question", "answer", "category")
JSON_KEYS = ("question", "answer", "category", "kind")
_BOM = b"\xef\xbb\xbf"
_HEADING = re.compile(r"^ {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^ {0,3}(```|~~~)")


class KbImportError(InvalidRequest):
    """A knowledge file that cannot be imported; the message names the file and the line."""

    code = "invalid_knowledge_file"


@dataclass(frozen=True, slots=True)
class _Raw:
    """One parsed record before validation, with where it came from."""

    where: str  # "line 7" or "item 3"
    question: Any
    answer: Any
    category: Any = None
    kind: Any = "faq"


def parse_file(path: Path) -> list[KbEntry]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise KbImportError(f"cannot read {path}: {exc.strerror}") from None
    return parse_bytes(data, path.name)


def parse_bytes(data: bytes, filename: str) -> list[KbEntry]:
    """The format comes from the file name's suffix; the text must be UTF-8 (a BOM is fine)."""
    suffix = Path(filename).suffix.lower()
    if suffix not in SUFFIXES:
        raise KbImportError(
            f"{filename}: unsupported file type {suffix or '(none)'!r}; "
            f"expected one of {', '.join(SUFFIXES)}"
        )
    text = _decode(data, filename)
    if not text.strip():
        raise KbImportError(f"{filename}: the file is empty")
    if suffix == ".csv":
        raws = _csv(text, filename)
    elif suffix == ".json":
        raws = _json(text, filename)
    elif suffix == ".jsonl":
        raws = _jsonl(text, filename)
    else:
        raws = _markdown(text, filename)
    return _validate(raws, filename)


def _decode(data: bytes, filename: str) -> str:
    body = data.removeprefix(_BOM)
    try:
        return body.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = body.count(b"\n", 0, exc.start) + 1
        raise KbImportError(
            f"{filename} line {line}: not valid UTF-8 (byte 0x{body[exc.start]:02x}); "
            "save the file as UTF-8"
        ) from None


def _csv(text: str, filename: str) -> list[_Raw]:
    reader = csv.reader(io.StringIO(text, newline=""), strict=True)
    raws: list[_Raw] = []
    try:
        header = next(reader)
        names = [name.strip().lower() for name in header]
        if (
            len(set(names)) != len(names)
            or not {"question", "answer"} <= set(names)
            or not set(names) <= set(CSV_COLUMNS)
        ):
            raise KbImportError(
                f"{filename} line 1: header is {','.join(header)!r}; expected the columns "
                "question,answer and optionally category (in any order)"
            )
        index = {name: names.index(name) for name in names}
        start = reader.line_num + 1
        for row in reader:
            where = f"line {start}"
            start = reader.line_num + 1
            if not any(cell.strip() for cell in row):
                continue  # a blank line
            if len(row) != len(names):
                raise KbImportError(
                    f"{filename} {where}: {len(row)} fields, the header has {len(names)}"
                )
            category = row[index["category"]] if "category" in index else None
            raws.append(_Raw(where, row[index["question"]], row[index["answer"]], category))
    except csv.Error as exc:
        raise KbImportError(f"{filename} line {reader.line_num}: bad CSV: {exc}") from None
    return raws


def _json(text: str, filename: str) -> list[_Raw]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise KbImportError(f"{filename} line {exc.lineno}: invalid JSON: {exc.msg}") from None
    if isinstance(document, dict) and set(document) == {"entries"}:
        document = document["entries"]
    if not isinstance(document, list):
        raise KbImportError(
            f"{filename}: expected a JSON list of objects with question and answer "
            '(or {"entries": [...]})'
        )
    return [_object(item, f"item {n}", filename) for n, item in enumerate(document, 1)]


def _jsonl(text: str, filename: str) -> list[_Raw]:
    raws = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            item = json.loads(line)
        except json.JSONDecodeError as exc:
            raise KbImportError(f"{filename} line {number}: invalid JSON: {exc.msg}") from None
        raws.append(_object(item, f"line {number}", filename))
    return raws


def _object(item: Any, where: str, filename: str) -> _Raw:
    if not isinstance(item, dict):
        raise KbImportError(
            f"{filename} {where}: expected an object with question and answer, "
            f"got {type(item).__name__}"
        )
    unknown = sorted(set(item) - set(JSON_KEYS))
    if unknown:
        raise KbImportError(
            f"{filename} {where}: unknown key {unknown[0]!r}; expected {', '.join(JSON_KEYS)}"
        )
    return _Raw(
        where, item.get("question"), item.get("answer"), item.get("category"), item.get("kind")
    )


def _markdown(text: str, filename: str) -> list[_Raw]:
    """Each ATX heading starts an entry; '?' or '？' at its end makes it a question.

    A heading with no text below it (a section title) is no entry, but gives its
    text as the category of the entries nested under it.
    """
    raws: list[_Raw] = []
    stack: list[tuple[int, str]] = []  # enclosing headings: (level, text)
    current: tuple[int, int, str, list[str]] | None = None  # line, level, heading, body
    in_fence = False

    def close() -> None:
        if current is None:
            return
        line, level, heading, body = current
        answer = "\n".join(body).strip()
        is_question = heading.endswith(("?", "？"))
        if answer or is_question:
            category = next((t for lv, t in reversed(stack) if lv < level), None)
            kind = "faq" if is_question else "passage"
            raws.append(_Raw(f"line {line}", heading, answer, category, kind))

    for number, line in enumerate(text.splitlines(), 1):
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match is None:
            if current is not None:
                current[3].append(line)
            continue
        close()
        level, heading = len(match.group(1)), (match.group(2) or "").strip()
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, heading))
        current = (number, level, heading, [])
    close()
    if not raws and not any(_HEADING.match(line) for line in text.splitlines()):
        raise KbImportError(
            f"{filename}: no Markdown headings; each entry starts with a heading "
            "('## How long does delivery take?' followed by its answer)"
        )
    return raws


def _validate(raws: Iterable[_Raw], filename: str) -> list[KbEntry]:
    entries: list[KbEntry] = []
    seen: dict[str, str] = {}  # normalised question -> where
    for raw in raws:
        for name in ("question", "answer", "category", "kind"):
            value = getattr(raw, name)
            if value is not None and not isinstance(value, str):
                raise KbImportError(
                    f"{filename} {raw.where}: {name} must be text, got {type(value).__name__}"
                )
        question, answer = (raw.question or "").strip(), (raw.answer or "").strip()
        if not normalize(question):
            raise KbImportError(f"{filename} {raw.where}: empty question")
        if not answer:
            raise KbImportError(f"{filename} {raw.where}: empty answer")
        kind = raw.kind or "faq"
        if kind not in KINDS:
            raise KbImportError(
                f"{filename} {raw.where}: kind is {kind!r}; expected one of {', '.join(KINDS)}"
            )
        key = normalize(question)
        if key in seen:
            raise KbImportError(
                f"{filename} {raw.where}: duplicate question {question!r} (first at {seen[key]})"
            )
        seen[key] = raw.where
        entries.append(
            KbEntry.make(question, answer, category=raw.category, kind=_kind(kind), source=filename)
        )
    if not entries:
        raise KbImportError(f"{filename}: no entries found")
    return entries


def _kind(value: str) -> Kind:
    return "passage" if value == "passage" else "faq"
