"""Keeping the answer cache true to the knowledge base: the cached answers a change
to it evicts."""

from __future__ import annotations

import logging

from kefu.cache.answers import AnswerCache
from kefu.knowledge.base import KbChange
from kefu.knowledge.embedder import Embedder

log = logging.getLogger("kefu.fastpath")

# A cached answer this close (cosine distance) to a changed KB question may now be wrong.
NEAR_A_CHANGE = 0.1
# Past this many changed entries, evict every cached answer rather than check each one
# against every change: a change that large re-bases what the answers should say.
NEARNESS_CHECK_MAX = 16


def evict_affected(
    cache: AnswerCache, embedder: Embedder, change: KbChange, *, cache_threshold: float
) -> int:
    """Evict the answers cached from the changed entries or near their questions."""
    touched = change.touched
    if len(touched) > NEARNESS_CHECK_MAX:
        evicted = cache.evict(everything=True)
    else:
        evicted = cache.invalidate(
            source_ids={entry.id for entry in touched},
            near=embedder.embed_queries([entry.question for entry in touched]),
            within=max(cache_threshold, NEAR_A_CHANGE),
        )
    if evicted:
        log.info("knowledge base changed: evicted %d cached answers", evicted)
    return evicted
