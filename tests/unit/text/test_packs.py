"""Language packs: found through their entry points, read once, joined in name order."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from kefu import plugins
from kefu.fastpath import smalltalk
from kefu.text import packs, places

CONCERNS = ("lexicon", "places", "rules", "guard", "smalltalk")


@pytest.fixture
def fresh_reads() -> Iterator[None]:
    packs.forget()
    yield
    packs.forget()


@pytest.fixture
def with_pack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fresh_reads: None) -> Path:
    """A third installed pack, ``xx``, whose files the test writes."""
    installed = plugins.names(plugins.LANGUAGES)
    load = plugins.load
    extra = tmp_path / "xx"
    extra.mkdir()

    def load_with_extra(group: str, name: str) -> object:
        return extra if name == "xx" else load(group, name)

    monkeypatch.setattr(plugins, "names", lambda group: (*installed, "xx"))
    monkeypatch.setattr(plugins, "load", load_with_extra)
    return extra


def test_kefu_registers_english_and_chinese_with_every_concern() -> None:
    assert {"en", "zh"} <= set(plugins.names(plugins.LANGUAGES))
    for concern in CONCERNS:
        assert len(packs.read(concern)) >= 2, concern


def test_every_pattern_of_every_pack_compiles() -> None:
    for concern in ("rules", "guard"):
        for data in packs.read(concern):
            for key, patterns in data.get("patterns", {}).items():
                for pattern in patterns:
                    assert re.compile(pattern), (concern, key, pattern)


def test_a_place_has_one_key_in_every_language() -> None:
    assert places.ENGLISH[("singapore",)] == places.CHINESE["新加坡"] == "singapore"
    assert places.ENGLISH[("kl",)] == places.CHINESE["吉隆坡"] == "kuala lumpur"


def test_an_added_pack_is_joined_after_the_others(with_pack: Path) -> None:
    (with_pack / "lexicon.toml").write_text(
        '[words]\nnegations = "ne pas"\nnumber_words = { deux = 2 }\n', encoding="utf-8"
    )
    negations = packs.joined("lexicon", "words", "negations")
    assert negations[-2:] == ("ne", "pas")
    assert "not" in negations  # English's are kept
    assert packs.merged("lexicon", "words", "number_words")["deux"] == 2
    assert packs.joined("lexicon", "words", "no_such_list") == ()


def test_a_places_names_in_each_pack_are_joined(with_pack: Path) -> None:
    (with_pack / "places.toml").write_text('[words]\nsingapore = ["singapour"]\n', encoding="utf-8")
    assert packs.merged("places", "words")["singapore"] == ["singapore", "singapour"]


def test_a_pack_without_a_file_adds_nothing(with_pack: Path) -> None:
    assert len(packs.read("rules")) == len(plugins.names(plugins.LANGUAGES)) - 1


def test_fragments_are_filled_in_and_quantifiers_left(with_pack: Path) -> None:
    (with_pack / "rules.toml").write_text(
        "[fragments]\nthing = '(?:colis|paquet)'\n"
        "[patterns]\norder_question = ['''o[uù] est mon {thing}.{0,4}''']\n",
        encoding="utf-8",
    )
    assert packs.joined("rules", "patterns", "order_question")[-1] == (
        "o[uù] est mon (?:colis|paquet).{0,4}"
    )


def test_an_unknown_fragment_is_named(with_pack: Path) -> None:
    (with_pack / "rules.toml").write_text(
        "[fragments]\nthing = 'colis'\n[patterns]\nhow_to = ['{thnig}']\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"xx/rules\.toml: no fragment is named 'thnig'"):
        packs.read("rules")


def test_an_entry_point_that_is_not_a_directory_is_named(
    monkeypatch: pytest.MonkeyPatch, fresh_reads: None
) -> None:
    monkeypatch.setattr(plugins, "names", lambda group: ("bad",))
    monkeypatch.setattr(plugins, "load", lambda group, name: "not a directory")
    with pytest.raises(TypeError, match="'bad' is not a directory"):
        packs.read("rules")


def test_a_list_no_pack_holds_never_matches(fresh_reads: None) -> None:
    assert re.search(packs.any_pattern("rules", "no_such_key"), "anything at all") is None


def test_one_pack_is_read_alone(with_pack: Path) -> None:
    (with_pack / "rules.toml").write_text("[patterns]\nhow_to = ['comment']\n", encoding="utf-8")
    assert packs.of("rules", "xx") == {"patterns": {"how_to": ["comment"]}}
    assert packs.of("rules", "en") == packs.read("rules")[0]
    assert packs.of("lexicon", "xx") == {}  # no such file
    assert packs.of("rules", "no_such_language") == {}


def test_a_smalltalk_reply_is_its_language_s_pack_s(with_pack: Path) -> None:
    (with_pack / "smalltalk.toml").write_text(
        "[phrases]\ngreeting = ['salut|bonjour']\n"
        "[replies]\ngreeting = 'Bonjour ! Ici {chez}{orders}.'\n"
        "[named]\nchez = '{name}'\n[unnamed]\nchez = 'nous'\n"
        "[orders]\nclause = ' (commande {example})'\n",
        encoding="utf-8",
    )
    assert smalltalk.smalltalk_reply("greeting", "xx") == "Bonjour ! Ici nous."
    assert smalltalk.smalltalk_reply(
        "greeting", "xx", shop_name="Acme|艾克美", order_example="AC-1"
    ) == ("Bonjour ! Ici Acme (commande AC-1).")
    # A kind the pack has no reply for is answered in English.
    assert smalltalk.smalltalk_reply("thanks", "xx") == smalltalk.smalltalk_reply("thanks", "en")
    # Its phrases are joined to the others'.
    phrase = smalltalk._compile()
    for text in ("bonjour", "hello", "你好"):
        match = phrase.match(text)
        assert match is not None
        assert match.lastgroup == "greeting"


def test_a_smalltalk_phrase_of_no_kind_is_named(with_pack: Path) -> None:
    (with_pack / "smalltalk.toml").write_text(
        "[phrases]\nweather = ['il pleut']\n", encoding="utf-8"
    )
    with pytest.raises(ValueError, match=r"unknown kinds \['weather'\]"):
        smalltalk._compile()
