"""The questions a shop suggests to a new customer: the chat page's buttons, a WeChat
follower's greeting."""

from __future__ import annotations

from kefu.knowledge.entries import KbEntry
from kefu.service.runtime import Runtime

SUGGESTIONS = 4


def suggested(entries: list[KbEntry], asked: dict[str, int], lang: str) -> list[str]:
    """The most asked FAQ questions in ``lang``, topped up with one per category so a new
    shop's page suggests something from each part of its knowledge base."""
    faqs = [e for e in entries if e.kind == "faq" and e.lang == lang]
    ranked = sorted((e for e in faqs if asked.get(e.id)), key=lambda e: -asked[e.id])
    chosen = ranked[:SUGGESTIONS]
    seen = {e.category for e in chosen}
    for entry in faqs:  # by category, then question
        if len(chosen) >= SUGGESTIONS:
            break
        if entry.category not in seen and entry not in chosen:
            chosen.append(entry)
            seen.add(entry.category)
    return [e.question for e in chosen]


async def suggestions(runtime: Runtime | None) -> dict[str, list[str]]:
    """By language; none while the knowledge base is closed or off."""
    fast_path = runtime.fast_path if runtime is not None else None
    if runtime is None or fast_path is None or fast_path.kb is None:
        return {"en": [], "zh": []}
    entries = await fast_path.read_kb(lambda kb: kb.entries())
    asked = dict(runtime.asked)
    return {lang: suggested(entries, asked, lang) for lang in ("en", "zh")}
