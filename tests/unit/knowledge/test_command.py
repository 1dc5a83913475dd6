"""`kefu kb`: import, list, search and remove through kefu.cli.main."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kefu.cli import main

CSV = """question,answer,category
How long does delivery take?,Two to four business days.,shipping
怎么申请退货？,在订单页面点击退货。,退货
"""


@pytest.fixture
def shop(tmp_path: Path) -> Path:
    path = tmp_path / "shop.csv"
    path.write_text(CSV, encoding="utf-8")
    return path


def kb(data_dir: Path, *args: str) -> list[str]:
    return ["kb", args[0], "--data-dir", str(data_dir), *args[1:]]


def test_import_list_search_remove(
    tmp_path: Path, shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "data"
    assert main(kb(data, "import", str(shop))) == 0
    out, err = capsys.readouterr()
    assert out == f"imported 2 (2 added, 0 updated) from {shop}\n"
    assert "2/2" in err  # the progress bar
    assert (data / "knowledge.db").exists()

    assert main(kb(data, "import", str(shop))) == 0
    assert capsys.readouterr().out == f"imported 2 (0 added, 0 updated) from {shop}\n"

    assert main(kb(data, "list", "--json")) == 0
    entries = json.loads(capsys.readouterr().out)
    assert [e["category"] for e in entries] == ["shipping", "退货"]
    assert main(kb(data, "list", "--category", "shipping")) == 0
    out = capsys.readouterr().out
    assert "How long does delivery take?" in out
    assert "退货" not in out

    assert main(kb(data, "search", "我要退货", "-k", "1", "--json")) == 0
    [hit] = json.loads(capsys.readouterr().out)
    assert hit["question"] == "怎么申请退货？"
    assert set(hit) >= {"score", "lexical", "dense", "id"}
    assert main(kb(data, "search", "when does my parcel arrive")) == 0
    assert "How long does delivery take?" in capsys.readouterr().out.splitlines()[1]

    assert main(kb(data, "remove", entries[0]["id"])) == 0
    assert capsys.readouterr().out.startswith(f"removed {entries[0]['id']}")
    assert main(kb(data, "remove", entries[0]["id"])) == 2
    assert "kefu kb: error: no knowledge entry with id" in capsys.readouterr().err


def test_bad_file_is_one_line_and_imports_nothing(
    tmp_path: Path, shop: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.csv"
    bad.write_text("question,answer\nA?,yes\nB?,\n", encoding="utf-8")
    data = tmp_path / "data"
    assert main(kb(data, "import", str(shop), str(bad))) == 2
    out, err = capsys.readouterr()
    assert err == "kefu kb: error: bad.csv line 3: empty answer\n"
    assert out == ""
    assert main(kb(data, "list", "--json")) == 0
    assert json.loads(capsys.readouterr().out) == []  # shop.csv was not imported either


def test_data_dir_from_environment(
    tmp_path: Path, shop: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KEFU_DATA_DIR", str(tmp_path / "env-data"))
    assert main(["kb", "import", str(shop)]) == 0
    assert (tmp_path / "env-data" / "knowledge.db").exists()


def test_every_flag_has_help(capsys: pytest.CaptureFixture[str]) -> None:
    for command in ("import", "list", "search", "remove"):
        with pytest.raises(SystemExit):
            main(["kb", command, "--help"])
        help_text = capsys.readouterr().out
        assert "--data-dir" in help_text
