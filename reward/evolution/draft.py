"""Draft a candidate leaf for a cluster of uncovered items: placement, criterion, trigger, tags.

Placement: the internal node (not the root) whose ``title: definition`` is most similar to the
cluster's centroid; the next best are kept as alternatives for the reviewer. Text, two ways:

- ``offline``: the representative item's criterion becomes the leaf's criterion, its main clause
  the title (whole words, never cut mid-clause with "..."). A criterion that names no situation
  gets a trigger from the cluster's most common HealthBench theme ("If the user describes symptoms
  that may need urgent care, ..."), so the draft passes ``tree lint``'s trigger rule; a specific
  item still makes a narrow leaf: the review step is where it is generalised.
- ``llm``: the judge writes a general check from up to ``max_examples`` items with our prompt
  (``Judge.generate_json``, cached), choosing the parent among the shortlisted nodes; an answer
  that cannot be used falls back to the offline draft, and the proposal says so. Its trigger is
  written into the criterion when the criterion names no situation itself.

Every draft is then checked with ``tree lint``'s text rules (:func:`draft_lint`); what they still
flag (a vacuous or bundled criterion copied from a rubric item) is recorded on the proposal, which
is then not recommended, and ``tree apply`` refuses it until a reviewer rewrites it.

The grounding is always left to fill in: no model should invent a guideline reference.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from typing import Any

from reward.evolution.cluster import Cluster
from reward.evolution.encoder import CachedEncoder
from reward.evolution.proposals import GROUNDING_TODO, Evidence, NodeDraft, Proposal, draft_lint
from reward.judge.templates import Template
from reward.judge.types import JudgeItem, Message
from reward.router.embedding import node_text
from reward.tree.graph import RubricTree
from reward.tree.schema import AXES, LeafTags

DRAFT = Template(
    name="rubricstree-leaf-draft-v1",
    mode="explain",
    system=(
        "You extend a taxonomy of atomic yes/no checks that grade replies of an AI health assistant."
        " Physicians wrote the rubric items below for real conversations, and no existing check covers"
        " them. Write ONE new general check that would settle most of them: a single verifiable"
        " behaviour of the reply, phrased as a statement a grader answers yes or no, not tied to one"
        " patient. Also write the trigger (the situation in which the check applies), a short title,"
        " the polarity (positive when the check describes desired behaviour, negative when it"
        " describes a failure) and the parent: the id of the most fitting node among the candidates."
        " Reply with a JSON object with the keys title, criterion, trigger, polarity, parent."),
    user="Uncovered rubric items:\n{{conversation}}\n\nCandidate parent nodes:\n{{criterion}}\n\nReturn the JSON object now.",
)
DRAFT_SCHEMA = {
    "type": "object",
    "properties": {"title": {"type": "string"}, "criterion": {"type": "string"}, "trigger": {"type": "string"},
                   "polarity": {"type": "string", "enum": ["positive", "negative"]}, "parent": {"type": "string"}},
    "required": ["title", "criterion", "trigger", "polarity", "parent"],
}
# The same object as a whitespace-free regular expression with bounded strings: a weak judge cannot
# spend its budget on blanks or an endless string (see ``Judge.generate_json``).
_S = r'[^"\\\n]'
DRAFT_REGEX = (r'\{"title":"' + _S + r'{1,80}","criterion":"' + _S + r'{1,240}","trigger":"' + _S
               + r'{0,160}","polarity":"(positive|negative)","parent":"' + _S + r'{1,60}"\}')


def placements(tree: RubricTree, cluster: Cluster, encoder: CachedEncoder, k: int = 3) -> list[dict[str, Any]]:
    """The ``k`` internal nodes most similar to the cluster, best first: ``{id, similarity}``."""
    ids = [nid for nid, n in tree.nodes.items() if not n.is_leaf and nid != tree.root]
    emb = encoder.encode([node_text(tree[nid]) for nid in ids])
    sims = emb @ cluster.centroid
    order = sorted(range(len(ids)), key=lambda j: (-float(sims[j]), ids[j]))[:k]
    return [{"id": ids[j], "similarity": round(float(sims[j]), 4)} for j in order]


def _slug(text: str, taken: set[str], prefix: str = "ev_") -> str:
    words = re.findall(r"[a-z0-9]+", text.lower())
    stop = {"the", "a", "an", "of", "to", "and", "or", "that", "for", "in", "on", "with", "if", "is", "be", "as"}
    base = prefix + "_".join([w for w in words if w not in stop][:5] or ["leaf"])
    nid, n = base, 2
    while nid in taken:
        nid, n = f"{base}_{n}", n + 1
    taken.add(nid)
    return nid


# The situation each HealthBench theme is about: the trigger of an offline draft whose criterion
# names none. Our wording; a reviewer narrows it.
THEME_TRIGGERS = {
    "emergency_referrals": "the user describes symptoms or events that may need urgent care",
    "context_seeking": "the user's message leaves out details needed to answer safely",
    "hedging": "the right answer is uncertain or depends on facts the user has not given",
    "global_health": "the user's setting may limit access to care, tests or medicines",
    "health_data_tasks": "the user asks for work on health records, notes or health data",
    "communication": "the user asks a health question",
    "complex_responses": "the user asks a question that needs a detailed answer",
}
DEFAULT_TRIGGER = "the user asks a health question"
_LEADING_TRIGGER = re.compile(r"^\s*(if|when|whenever|for|once|unless)\b[^,]*,\s*", re.IGNORECASE)


def with_trigger(criterion: str, trigger: str) -> str:
    """``criterion`` if it names a situation already (``tree lint``'s rule), else
    ``"If <trigger>, <criterion>"``."""
    from reward.tree.lint import has_trigger

    criterion = criterion.strip()
    trig = re.sub(r"^\s*(if|when|whenever)\s+", "", trigger.strip(), flags=re.IGNORECASE).rstrip(" ,.;:")
    if has_trigger(criterion) or not trig or not criterion:
        return criterion
    return f"If {trig}, {criterion[0].lower()}{criterion[1:]}"


def _title(text: str, max_words: int = 14) -> str:
    """A leaf title from a criterion: its main clause (the trigger clause dropped), in whole words."""
    main = _LEADING_TRIGGER.sub("", text.strip(), count=1) or text.strip()
    clause = re.split(r"[.;:(]\s|\s[-\u2013\u2014]\s|, (?=(?:and|but|or|which|so|such as|e\.g\.)\b)", main)[0]
    words = clause.rstrip(" ,.;:").split()
    if len(words) > max_words:  # end at the last comma inside the limit, else at the limit
        head = " ".join(words[:max_words])
        words = (head[: head.rfind(",")] if "," in head else head).split()
    title = " ".join(words).rstrip(" ,.;:") or text.strip()[:80]
    return (title[0].upper() + title[1:])[:120]


def theme_trigger(cluster: Cluster) -> str:
    """The trigger of the cluster's most common theme (``DEFAULT_TRIGGER`` when it has none)."""
    themes = Counter(t for i in cluster.items for t in i.themes)
    for theme, _ in themes.most_common():
        if theme in THEME_TRIGGERS:
            return THEME_TRIGGERS[theme]
    return DEFAULT_TRIGGER


def linted(p: Proposal) -> Proposal:
    """``p`` with its draft's lint problems in ``lint`` (and so not recommended)."""
    return p.model_copy(update={"lint": draft_lint(p.node)})


def _tags(cluster: Cluster) -> LeafTags:
    axes = Counter(a for i in cluster.items for a in i.axes if a in AXES)
    themes = Counter(t for i in cluster.items for t in i.themes)
    axis = axes.most_common(1)[0][0] if axes else None
    return LeafTags(axis=axis, themes=tuple(sorted(t for t, _ in themes.most_common(3))))


def offline_proposal(pid: str, tree: RubricTree, cluster: Cluster, encoder: CachedEncoder, taken: set[str],
                     max_examples: int = 8) -> Proposal:
    """A proposal drafted from the cluster's representative item (no model)."""
    rep = cluster.items[0].criterion
    where = placements(tree, cluster, encoder)
    trigger = theme_trigger(cluster)
    return Proposal(
        id=pid, kind="add_leaf",
        node=NodeDraft(id=_slug(rep, taken), title=_title(rep), trigger=trigger,
                       criterion=with_trigger(rep, trigger), polarity="positive",
                       grounding=GROUNDING_TODO, tags=_tags(cluster)),
        parents=[where[0]["id"]], placement_alternatives=where, drafted_by="offline",
        evidence=Evidence(n_items=len(cluster.items), points=cluster.points, rows=cluster.rows,
                          items=list(dict.fromkeys(i.criterion for i in cluster.items))[:max_examples]))


async def llm_proposals(props: Sequence[Proposal], tree: RubricTree, judge, taken: set[str],
                        max_examples: int = 8) -> list[Proposal]:
    """Rewrite offline drafts with the judge; a failed or unusable answer keeps the offline draft."""
    asks = []
    for p in props:
        items = "\n".join(f"- {t}" for t in p.evidence.items[:max_examples])
        cands = "\n".join(f"- {a['id']}: {node_text(tree[a['id']])}" for a in p.placement_alternatives)
        asks.append(JudgeItem(conversation=(Message(role="items", content=items),), response="", criterion=cands))
    results = await judge.generate_json(DRAFT, asks, schema=DRAFT_SCHEMA, regex=DRAFT_REGEX,
                                         max_tokens=700, on_failure="record")
    out = []
    for p, r in zip(props, results):
        v = r.value or {}
        crit = str(v.get("criterion", "")).strip()
        title = str(v.get("title", "")).strip()
        if not r.ok or not crit or not title:
            out.append(p.model_copy(update={"note": f"llm draft unusable ({r.failure or 'empty fields'}): offline draft kept"}))
            continue
        allowed = [a["id"] for a in p.placement_alternatives]
        parent = str(v.get("parent", "")).strip()
        polarity = v.get("polarity") if v.get("polarity") in ("positive", "negative") else "positive"
        assert p.node is not None
        taken.discard(p.node.id)
        trigger = str(v.get("trigger", "")).strip()
        node = p.node.model_copy(update={"id": _slug(title, taken), "title": title[:120],
                                         "criterion": with_trigger(crit, trigger or p.node.trigger),
                                         "trigger": trigger or p.node.trigger, "polarity": polarity})
        out.append(p.model_copy(update={
            "node": node, "parents": [parent if parent in allowed else allowed[0]], "drafted_by": "llm",
            "note": "" if parent in allowed else f"llm parent '{parent}' not among the candidates: best match used"}))
    return out
