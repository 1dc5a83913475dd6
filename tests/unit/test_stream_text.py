"""StreamText: whole UTF-8 characters only, stop strings cut even across tokens."""

from __future__ import annotations

import pytest

from kefu.engine.text import StreamText


def feed_all(stream: StreamText, pieces: list[bytes]) -> list[str]:
    return [stream.feed(piece) for piece in pieces]


def one_byte_at_a_time(text: str) -> list[bytes]:
    data = text.encode("utf-8")
    return [data[i : i + 1] for i in range(len(data))]


def test_plain_ascii_passes_straight_through() -> None:
    stream = StreamText()
    assert feed_all(stream, [b"Hello", b", ", b"world"]) == ["Hello", ", ", "world"]
    assert stream.finish() == ""
    assert stream.text == "Hello, world"
    assert stream.stopped is False


def test_chinese_one_byte_at_a_time() -> None:
    stream = StreamText()
    out = feed_all(stream, one_byte_at_a_time("你好"))
    assert out == ["", "", "你", "", "", "好"]
    assert stream.finish() == ""
    assert stream.text == "你好"


@pytest.mark.parametrize("text", ["你好\uff0c世界", "héllo wörld", "🙂 ok 👍🏽", "a你b好c"])
@pytest.mark.parametrize("size", [1, 2, 3, 5])
def test_no_broken_characters_at_any_split(text: str, size: int) -> None:
    data = text.encode("utf-8")
    stream = StreamText()
    out = [stream.feed(data[i : i + size]) for i in range(0, len(data), size)]
    out.append(stream.finish())
    for piece in out:
        assert "\ufffd" not in piece
        piece.encode("utf-8")  # a lone surrogate would fail here
    assert "".join(out) == text
    assert stream.text == text


def test_stop_spanning_several_feeds_is_cut() -> None:
    stream = StreamText(["<|end|>"])
    out = feed_all(stream, [b"Hello", b" <|", b"en", b"d|>", b" more", b"text"])
    assert out == ["Hello", " ", "", "", "", ""]
    assert stream.stopped is True
    assert stream.finish() == ""
    assert stream.text == "Hello "


def test_stop_inside_one_feed_drops_the_rest() -> None:
    stream = StreamText(["STOP"])
    assert stream.feed(b"abcSTOPdef") == "abc"
    assert stream.stopped is True
    assert stream.feed(b"more") == ""
    assert stream.finish() == ""
    assert stream.text == "abc"


def test_stop_at_the_very_start() -> None:
    stream = StreamText(["\n\n"])
    assert feed_all(stream, [b"\n", b"\nlater"]) == ["", ""]
    assert stream.stopped is True
    assert stream.text == ""


def test_multibyte_stop_split_across_bytes() -> None:
    stream = StreamText(["。"])
    out = feed_all(stream, one_byte_at_a_time("好。后"))
    assert "".join(out) == "好"
    assert stream.stopped is True
    assert stream.text == "好"


def test_held_prefix_that_is_not_a_stop_is_released() -> None:
    stream = StreamText(["STOP"])
    assert stream.feed(b"ab") == "ab"
    assert stream.feed(b"ST") == ""  # might be the start of STOP: held
    assert stream.feed(b"AR") == "STAR"  # it was not
    assert stream.stopped is False
    assert stream.text == "abSTAR"


def test_partial_release_keeps_only_the_possible_stop_start() -> None:
    stream = StreamText(["</s>"])
    assert stream.feed(b"x <") == "x "
    assert stream.feed(b"b>") == "<b>"
    assert stream.feed(b"</") == ""
    assert stream.feed(b"s>") == ""
    assert stream.stopped is True
    assert stream.text == "x <b>"


def test_finish_flushes_held_text() -> None:
    stream = StreamText(["STOP"])
    assert stream.feed(b"xS") == "x"
    assert stream.feed(b"TO") == ""
    assert stream.finish() == "STO"
    assert stream.text == "xSTO"
    assert stream.stopped is False


def test_finish_drops_the_bytes_of_a_character_cut_midway() -> None:
    stream = StreamText()
    assert stream.feed("好你".encode()[:5]) == "好"
    assert stream.finish() == ""
    assert stream.text == "好"


def test_earliest_of_several_stops_wins() -> None:
    stream = StreamText(["b", "a"])
    assert stream.feed(b"xab") == "x"
    assert stream.text == "x"


def test_empty_stop_strings_are_ignored() -> None:
    stream = StreamText(["", "END"])
    assert stream.feed(b"text") == "text"
    assert stream.feed(b" END") == " "
    assert stream.stopped is True


def test_text_accumulates_across_feeds_and_finish() -> None:
    stream = StreamText(["###"])
    released = feed_all(stream, [b"one ", b"two #", b"# three", b" #"])
    released.append(stream.finish())
    assert "".join(released) == stream.text == "one two ## three #"
