"""Shop FAQs made from public intent and question-matching sets (tuning sets: the project's
charter allows HWU64, MASSIVE, SNIPS, ATIS, ABCD, Twitter customer support, AFQMC/ATEC;
every other public set is held out), in ``kb_quality.py``'s form.

Each labelled intent becomes one FAQ answer (``kb.csv``: one of its utterances as the
question; ``kb10.csv``: ten), its other utterances the customers' paraphrases; a quarter
of the intents are left out of the knowledge base, and their utterances are messages
of the shop's own domain that no answer answers (``near_miss``: the same domain, often
the same words, "remove my alarm" beside "set an alarm"); a few utterances of another
set are ``out_of_scope``. AFQMC is a question-pair set (Ant Financial customer service,
label 1: same meaning): a pair's first question is an entry, its second a paraphrase
(label 1) or a real near miss (label 0); it has no clusters of ten, so one question
per answer only.

The answers are placeholders naming the intent ("[hwu64] alarm set"): these sets hold
messages, not a shop's replies, so the answer's own words are a label's. What is
measured is whether the right entry is served.

Nothing downloads here: the sets come from GitHub snapshots brought onto this machine
with the search tool's ``fetch`` (``--mirror``, default ``/work/.mirror``), and the
files are written under ``benchmarks/data/public/`` (git-ignored: the project keeps no
copy of public data sets; this script rebuilds them, the same rows every time).
``traffic.csv`` holds the set's other messages (up to 1 000), for replays of learning
from traffic (``faq_replay.py``).

Sources (snapshot path, what is read, licence):

- ``hwu64``: xliuhw/NLU-Evaluation-Data (the HWU64 set), the 10 cross-validation folds'
  annotated test files, CC BY 4.0.
- ``snips``: sonos/nlu-benchmark, 2017-06-custom-intent-engines/*/train_*.json and
  validate_*.json, CC0 1.0.
- ``atis``: bringtree/SLU, data/atis.{train,test}.w-intent.iob (the ATIS corpus as
  distributed with JointSLU; LDC's terms apply to ATIS itself: used here for measuring
  only).
- ``afqmc``: LeslieOverfitting/nlp_AFQMC, data/dev.csv (the CLUE AFQMC dev split;
  released by Ant Financial for research).

Not built, not found as a GitHub snapshot holding the data (files of 4 MiB and more are
not in snapshots): MASSIVE (its repo ships code, the data is downloaded), ABCD (the
dialogues are one large file), Twitter customer support (Kaggle), ATEC.
"""

from __future__ import annotations

import argparse
import csv
import json
import random
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

OUT = Path(__file__).parent / "data" / "public"
SEED = 37
LEFT_OUT_SHARE = 0.25  # of the intents: their utterances are in-domain messages no answer answers
PHRASINGS = 10
# Messages a split (dev, test) aims at: ~200 paraphrases and ~60 near misses, spread
# over the answers and the left-out intents (4 to 30 each).
PARAPHRASES = 200
NEAR_MISSES = 60
# ``traffic.csv``: the rest of the set's messages in the same form, for replays of
# learning from traffic (``faq_replay.py``), at most this many.
TRAFFIC = 1000
OUT_OF_SCOPE = 40


@dataclass(frozen=True)
class Source:
    repo: str  # the snapshot's folder under --mirror
    origin: str  # where it came from, for SOURCE.txt
    licence: str


SOURCES = {
    "hwu64": Source(
        "xliuhw+NLU-Evaluation-Data", "github.com/xliuhw/NLU-Evaluation-Data", "CC BY 4.0"
    ),
    "snips": Source("sonos+nlu-benchmark", "github.com/sonos/nlu-benchmark", "CC0 1.0"),
    "atis": Source(
        "bringtree+SLU",
        "github.com/bringtree/SLU (ATIS as distributed with JointSLU)",
        "ATIS: LDC terms; used for measuring only",
    ),
    "afqmc": Source(
        "LeslieOverfitting+nlp_AFQMC",
        "github.com/LeslieOverfitting/nlp_AFQMC (CLUE AFQMC dev split)",
        "released by Ant Financial for research",
    ),
}


class Snapshot:
    def __init__(self, mirror: Path, source: Source) -> None:
        self.git = mirror / source.repo / "repo"
        if not self.git.exists():
            raise SystemExit(f"{self.git} is missing: fetch github:{source.origin.split()[0]}")

    def files(self) -> list[str]:
        out = subprocess.run(
            ["git", "-C", str(self.git), "ls-tree", "-r", "--name-only", "HEAD"],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout.splitlines()

    def read(self, path: str) -> str:
        out = subprocess.run(
            ["git", "-C", str(self.git), "show", f"HEAD:{path}"],
            check=True,
            capture_output=True,
            text=True,
        )
        return out.stdout


Utterances = dict[str, list[str]]  # intent -> its utterances


def hwu64(snapshot: Snapshot) -> Utterances:
    by_intent: Utterances = {}
    for path in snapshot.files():
        if "/testset/annotated/" in path and path.endswith(".json"):
            for row in json.loads(snapshot.read(path))["test_data_annotation"]:
                by_intent.setdefault(row["intent"], []).append(row["text"])
    return by_intent


def snips(snapshot: Snapshot) -> Utterances:
    by_intent: Utterances = {}
    for path in snapshot.files():
        name = path.rsplit("/", 1)[-1]
        if path.startswith("2017-06") and name.startswith(("train_", "validate_")):
            if name.endswith("_full.json"):
                continue
            for intent, rows in json.loads(snapshot.read(path)).items():
                for row in rows:
                    text = "".join(part["text"] for part in row["data"])
                    by_intent.setdefault(intent, []).append(text)
    return by_intent


def atis(snapshot: Snapshot) -> Utterances:
    by_intent: Utterances = {}
    for name in ("train", "test"):
        for line in snapshot.read(f"data/atis.{name}.w-intent.iob").splitlines():
            words, _, tags = line.partition("\t")
            intent = tags.split()[-1]
            if "#" in intent:  # two intents at once: no one answer
                continue
            text = " ".join(words.split()[1:-1])  # BOS ... EOS
            by_intent.setdefault(intent, []).append(text)
    return by_intent


READERS: dict[str, Callable[[Snapshot], Utterances]] = {
    "hwu64": hwu64,
    "snips": snips,
    "atis": atis,
}


def clean(by_intent: Utterances) -> Utterances:
    """Each utterance once in the whole set (a message asked word for word under two
    intents says nothing), stripped, in a fixed order."""
    owners: dict[str, set[str]] = {}
    for intent, texts in by_intent.items():
        for text in texts:
            owners.setdefault(" ".join(text.lower().split()), set()).add(intent)
    out: Utterances = {}
    seen: set[str] = set()
    for intent in sorted(by_intent):
        for text in by_intent[intent]:
            key = " ".join(text.lower().split())
            if len(owners[key]) == 1 and key not in seen and len(key) > 2:
                seen.add(key)
                out.setdefault(intent, []).append(" ".join(text.split()))
    return out


def answer_of(name: str, intent: str) -> str:
    words = intent.replace("atis_", "").replace("_", " ")
    spaced = "".join(f" {c.lower()}" if c.isupper() else c for c in words).strip()
    return f"[{name}] {spaced}"


Row = tuple[str, str, str, str]  # lang, kind, message, expected question


def from_intents(
    name: str, by_intent: Utterances, outside: list[str], lang: str
) -> dict[str, list[list[str]] | list[Row]]:
    rng = random.Random(f"{SEED}-{name}")
    usable = sorted(intent for intent, texts in by_intent.items() if len(texts) >= PHRASINGS + 8)
    rng.shuffle(usable)
    left_out = usable[: max(1, round(len(usable) * LEFT_OUT_SHARE))]
    answers = sorted(usable[len(left_out) :])
    per_answer = min(max(PARAPHRASES // len(answers), 4), 30)
    per_intent = min(max(NEAR_MISSES // len(left_out), 4), 30)
    kb: list[list[str]] = []
    kb10: list[list[str]] = []
    splits: dict[str, list[Row]] = {"dev": [], "test": [], "traffic": []}
    for intent in answers:
        texts = list(by_intent[intent])
        rng.shuffle(texts)
        answer = answer_of(name, intent)
        phrasings, rest = texts[:PHRASINGS], texts[PHRASINGS:]
        kb.append([phrasings[0], answer, intent])
        kb10 += [[text, answer, intent] for text in phrasings]
        for i, split in enumerate(("dev", "test")):
            chosen = rest[i * per_answer : (i + 1) * per_answer]
            splits[split] += [(lang, "paraphrase", text, phrasings[0]) for text in chosen]
        rest = rest[2 * per_answer :]
        splits["traffic"] += [(lang, "paraphrase", text, phrasings[0]) for text in rest]
    for intent in left_out:
        texts = list(by_intent[intent])
        rng.shuffle(texts)
        for i, split in enumerate(("dev", "test")):
            chosen = texts[i * per_intent : (i + 1) * per_intent]
            splits[split] += [(lang, "near_miss", text, "") for text in chosen]
        splits["traffic"] += [(lang, "near_miss", text, "") for text in texts[2 * per_intent :]]
    pool = list(outside)
    rng.shuffle(pool)
    for i, split in enumerate(("dev", "test")):
        chosen = pool[i * OUT_OF_SCOPE : (i + 1) * OUT_OF_SCOPE]
        splits[split] += [(lang, "out_of_scope", text, "") for text in chosen]
    traffic = splits["traffic"]
    rng.shuffle(traffic)
    files: dict[str, list[list[str]] | list[Row]] = {"kb.csv": kb, "kb10.csv": kb10}
    files |= {f"{split}.csv": splits[split] for split in ("dev", "test")}
    return files | {"traffic.csv": traffic[:TRAFFIC]}


def afqmc(snapshot: Snapshot) -> dict[str, list[list[str]] | list[Row]]:
    """Pairs whose first question is asked once in the file: an entry each. 60 pairs a
    split of each label; one question per answer. No traffic beyond them: another pair's
    second question has no entry of its own."""
    rows = list(csv.DictReader(snapshot.read("data/dev.csv").splitlines()))
    firsts: dict[str, int] = {}
    for row in rows:
        firsts[row["sentence1"]] = firsts.get(row["sentence1"], 0) + 1
    rng = random.Random(f"{SEED}-afqmc")
    pairs = [r for r in rows if firsts[r["sentence1"]] == 1 and r["sentence1"] != r["sentence2"]]
    rng.shuffle(pairs)
    same = [r for r in pairs if r["label"] == "1"]
    other = [r for r in pairs if r["label"] == "0"]
    per = 60
    kb: list[list[str]] = []
    splits: dict[str, list[Row]] = {"dev": [], "test": []}
    for i, split in enumerate(("dev", "test")):
        for r in same[i * per : (i + 1) * per]:
            kb.append([r["sentence1"], f"[afqmc] {r['sentence1']}", ""])
            splits[split].append(("zh", "paraphrase", r["sentence2"], r["sentence1"]))
        for r in other[i * per : (i + 1) * per]:
            kb.append([r["sentence1"], f"[afqmc] {r['sentence1']}", ""])
            splits[split].append(("zh", "near_miss", r["sentence2"], ""))
    return {"kb.csv": kb, "kb10.csv": kb, "dev.csv": splits["dev"], "test.csv": splits["test"]}


def write(name: str, files: dict[str, list[list[str]] | list[Row]], source: Source) -> None:
    out = OUT / name
    out.mkdir(parents=True, exist_ok=True)
    headers = {
        "kb.csv": ["question", "answer", "category"],
        "kb10.csv": ["question", "answer", "category"],
        "dev.csv": ["lang", "kind", "message", "expected_question"],
        "test.csv": ["lang", "kind", "message", "expected_question"],
        "traffic.csv": ["lang", "kind", "message", "expected_question"],
    }
    for file, rows in files.items():
        with (out / file).open("w", encoding="utf-8", newline="") as f:
            writer = csv.writer(f)
            writer.writerow(headers[file])
            writer.writerows(rows)
    answers = len(files["kb.csv"])
    (out / "SOURCE.txt").write_text(
        f"{name}: made by benchmarks/public_kbs.py from {source.origin}\n"
        f"licence: {source.licence}\n"
        f"{answers} answers; kb10.csv {len(files['kb10.csv'])} questions; "
        f"dev {len(files['dev.csv'])} and test {len(files['test.csv'])} messages\n",
        encoding="utf-8",
    )
    print(f"wrote {out}: {answers} answers, test {len(files['test.csv'])} messages")


def sample(texts: Iterable[list[str]], n: int) -> list[str]:
    flat = [text for group in texts for text in group]
    random.Random(SEED).shuffle(flat)
    return flat[:n]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"))
    parser.add_argument("--sets", default="hwu64,snips,atis,afqmc")
    args = parser.parse_args()
    wanted = args.sets.split(",")
    read = {
        name: clean(READERS[name](Snapshot(args.mirror, SOURCES[name])))
        for name in READERS
        if name in wanted or any(w in READERS for w in wanted)
    }
    # Out of scope: another set's messages (HWU64's for the flight and music sets, ATIS's
    # for HWU64, whose domains include music and weather but not flight booking).
    outside = {"hwu64": "atis", "snips": "atis", "atis": "hwu64"}
    for name in (n for n in READERS if n in wanted):
        other = read[outside[name]]
        if name == "snips":  # HWU64 plays music too: ATIS only
            other = read["atis"]
        files = from_intents(name, read[name], sample(other.values(), 2 * OUT_OF_SCOPE), "en")
        write(name, files, SOURCES[name])
    if "afqmc" in wanted:
        write("afqmc", afqmc(Snapshot(args.mirror, SOURCES["afqmc"])), SOURCES["afqmc"])


if __name__ == "__main__":
    main()
