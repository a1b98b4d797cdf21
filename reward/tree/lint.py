"""Lint a rubric tree's leaf criteria: the checks a careful author would make by hand.

Data flow: a loaded :class:`RubricTree` -> one pass of text rules over every leaf criterion
(trigger, vacuous wording, bundled checks) -> one embedding pass over all criteria for
near-duplicates -> a list of :class:`LintIssue`, sorted by kind and node. The CLI
(``rubricstree tree lint``) prints them and exits non-zero when there is any.

The rules are heuristics with a bias towards flagging: a flagged leaf is rewritten, not the
rule loosened. What each kind means:

- ``missing_trigger``: a leaf marked ``conditional`` (the default) whose criterion names no
  situation ("If the user reports ...", "when ...", "for a user who ..."). Without a trigger a
  judge cannot tell "not applicable" from "failed".
- ``vacuous``: a criterion that conditions on the response's own behaviour ("converts units
  correctly when it converts them"), or leans on an unstated standard ("where appropriate",
  "appropriately", "correctly" with no threshold given): nothing a judge can verify.
- ``bundled``: two checks joined by "and" (the main clause goes on with a second checking verb:
  "advises X and calls Y", "advises using X and calling Y"). A response that does one of them is
  neither a pass nor a fail.
- ``missing_severity``: a leaf with no ``severity`` of its own. Severity is the harm if the
  failure occurs and sets the failure's price (``reward.scoring.variants``); inheriting it from
  the branch the leaf sits in priced harm outside ``safety`` as minor.
- ``near_duplicate``: two criteria whose sentence embeddings (all-MiniLM-L6-v2 by default) have
  a cosine above ``threshold``: probably one check written twice, counted twice. Two members of one
  fault group are exempt: the group prices them once (a warning and the act it warns against).
- ``fault_group``: a fault group that cannot be priced as written: an act (``acts``) that is a
  positive leaf (an act names what the reply did wrong: it is met when the reply fails), a group
  whose members share no trigger situation in their routing (no member conditional on anything,
  so every member applies to every reply: that is one leaf, not a group), or a catch-all leaf
  that is not an always-on, unconditional negative check.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from reward.tree.graph import RubricTree

LintKind = Literal["missing_trigger", "vacuous", "bundled", "missing_severity", "near_duplicate", "fault_group"]
DEFAULT_DUPLICATE_THRESHOLD = 0.9

# A trigger names the situation the check applies to. A leading "If ..."/"When ..." is the house
# style; a trigger later in the sentence ("... to a user who has ...") is accepted too.
TRIGGER = re.compile(
    r"\b(if|when|whenever|unless|once)\b"
    r"|\b(for|to|in)\s+(a|an|any)\s+(\w+\s+){0,3}?(user|person|parent|patient|child|caregiver|woman|"
    r"someone|adult|infant|baby|teenager)\s+(who|whose|with|aged|younger|older)\b",
    re.IGNORECASE)

# (pattern, why) pairs; each is checked on the whole criterion.
VACUOUS: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"(?<!\bas )\b(if|when|whenever|where)\s+(it|the response|the assistant)\s+(?!is\b)\w+", re.IGNORECASE),
     "the trigger is the response's own behaviour, so a response that skips it passes"),
    (re.compile(r"\b(where|when|if|as)\s+(appropriate|relevant|applicable|necessary|needed|required|"
                r"indicated)\b", re.IGNORECASE),
     "'as appropriate'-style trigger: the situation is not named"),
    (re.compile(r"\b(appropriate(ly)?|properly|adequate(ly)?|suitabl[ey])\b", re.IGNORECASE),
     "an unstated standard ('appropriate', 'properly'): say what the response must contain"),
)
_CORRECTLY = re.compile(r"\bcorrect(ly)?\b", re.IGNORECASE)
_HAS_STANDARD = re.compile(r"\d|:")  # a threshold or a colon introducing what "correct" means

# Verbs that start a check ("advises ...", "warns ..."), as third person and as gerund. "and"
# followed by one of them continues the main clause with a second check.
CHECK_VERBS = ("advise", "state", "warn", "recommend", "ask", "explain", "note", "name", "give",
               "tell", "suggest", "mention", "provide", "list", "say", "flag", "offer", "include",
               "refer", "check", "avoid", "use", "keep", "compare", "describe", "identify",
               "classify", "interpret", "quote", "convert", "compute", "base", "call", "seek",
               "recheck", "average", "contact", "go", "take", "stop", "repeat", "encourage")
_THIRD = {v: (v + "es" if v.endswith(("sh", "ch", "s", "x", "o")) else
              v[:-1] + "ies" if v.endswith("y") and v[-2] not in "aeiou" else v + "s") for v in CHECK_VERBS}
_IRREGULAR_GERUND = {"call": "calling", "flag": "flagging", "refer": "referring", "stop": "stopping"}
_GERUND = {v: _IRREGULAR_GERUND.get(v) or (v[:-1] + "ing" if v.endswith("e") else v + "ing") for v in CHECK_VERBS}
BUNDLED = re.compile(r"\band\s+(also\s+|then\s+)?(" + "|".join(sorted({*_THIRD.values(), *_GERUND.values()}))
                     + r")\b", re.IGNORECASE)
# A leading trigger clause ("If the user reports chest pain and sweating, ...") is not the check.
_LEADING_TRIGGER = re.compile(r"^\s*(if|when|whenever|for|once)\b[^,]*,", re.IGNORECASE)


class LintIssue(BaseModel):
    """One problem with one leaf (``other`` names the second leaf of a near-duplicate pair)."""

    model_config = ConfigDict(frozen=True)

    kind: LintKind
    node: str
    message: str
    other: str | None = None
    score: float | None = None


def has_trigger(criterion: str) -> bool:
    return TRIGGER.search(criterion) is not None


def vacuous_reasons(criterion: str) -> list[str]:
    out = [why for pat, why in VACUOUS if pat.search(criterion)]
    if _CORRECTLY.search(criterion) and not _HAS_STANDARD.search(criterion):
        out.append("'correctly' without the standard it is judged against")
    return out


def bundled_match(criterion: str) -> str | None:
    """The "and <check verb>" fragment that joins a second check, or None."""
    main = _LEADING_TRIGGER.sub("", criterion, count=1)
    m = BUNDLED.search(main)
    return m.group(0) if m else None


def text_issues(tree: RubricTree) -> list[LintIssue]:
    """Trigger, vacuous, bundled and severity checks on every leaf."""
    out: list[LintIssue] = []
    for leaf in tree.leaves:
        c = leaf.criterion or ""
        if leaf.conditional and not has_trigger(c):
            out.append(LintIssue(kind="missing_trigger", node=leaf.id, message=(
                "conditional leaf without a trigger ('If the user ...', 'when ...', 'for a user who ...');"
                " state the situation, or mark the leaf `conditional: false` if it applies to every reply")))
        if leaf.severity is None:
            out.append(LintIssue(kind="missing_severity", node=leaf.id, message=(
                "leaf without a severity: state `severity: critical`, `major` or `minor` (the harm if"
                " the failure occurs; critical for a missed emergency, a contraindicated drug, dose or"
                " combination, or collusion with self-harm, wherever the leaf sits)")))
        for why in vacuous_reasons(c):
            out.append(LintIssue(kind="vacuous", node=leaf.id, message=why))
        frag = bundled_match(c)
        if frag:
            out.append(LintIssue(kind="bundled", node=leaf.id,
                                 message=f"'{frag}' joins a second check: split it into two leaves"))
    return out


Encoder = Callable[[Sequence[str]], Any]


def default_encoder(progress: bool = False) -> Encoder:
    """Normalised all-MiniLM-L6-v2 sentence embeddings (the embedding router's offline model);
    ``progress`` shows a bar over the encoding batches on stderr."""
    from reward.router.embedding import load_default_model

    model = load_default_model()
    return lambda texts: model.encode(list(texts), normalize_embeddings=True, batch_size=16,
                                      show_progress_bar=progress, convert_to_numpy=True)


def duplicate_issues(tree: RubricTree, threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
                     encoder: Encoder | None = None) -> list[LintIssue]:
    """Pairs of leaves whose criteria embed closer than ``threshold`` (cosine)."""
    import numpy as np

    leaves = tree.leaves
    if len(leaves) < 2:
        return []
    emb = np.asarray((encoder or default_encoder())([leaf.criterion for leaf in leaves]), dtype=float)
    emb = emb / np.clip(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12, None)
    sim = emb @ emb.T
    out = []
    group = tree.fault_of
    for i, j in zip(*np.triu_indices(len(leaves), k=1)):
        a, b = leaves[i].id, leaves[j].id
        if a in group and group.get(a) == group.get(b):
            continue  # one fault group: priced once by design
        if sim[i, j] > threshold:
            out.append(LintIssue(kind="near_duplicate", node=leaves[i].id, other=leaves[j].id,
                                 score=round(float(sim[i, j]), 4),
                                 message=f"criterion is near-identical to '{leaves[j].id}' "
                                         f"(cosine {sim[i, j]:.3f} > {threshold}): merge them, tell them apart"
                                         " or put them in one fault group"))
    return out


def fault_issues(tree: RubricTree) -> list[LintIssue]:
    """Fault groups and catch-all leaves that cannot be priced as written (see the module docstring)."""
    out: list[LintIssue] = []
    for group in tree.faults.values():
        for act in group.acts:
            if tree[act].polarity != "negative":
                out.append(LintIssue(kind="fault_group", node=act, other=group.id, message=(
                    f"act of fault '{group.id}' is a positive leaf: an act names what the reply did wrong"
                    " (polarity negative), a missing step is an ordinary member")))
        if not any(tree[m].conditional for m in group.members):
            out.append(LintIssue(kind="fault_group", node=group.id, message=(
                "no member is conditional: members that apply to every reply and check one fault are one leaf")))
    for leaf in tree.leaves:
        if leaf.catch_all and (leaf.polarity != "negative" or leaf.conditional or not leaf.always_on):
            out.append(LintIssue(kind="fault_group", node=leaf.id, message=(
                "a catch-all must be an always-on, unconditional negative check (`always_on: true`,"
                " `conditional: false`, `polarity: negative`)")))
    return out


def lint_tree(tree: RubricTree, threshold: float = DEFAULT_DUPLICATE_THRESHOLD,
              encoder: Encoder | None = None, duplicates: bool = True) -> list[LintIssue]:
    """Every lint issue of ``tree``, sorted by kind then node.

    Args:
        threshold: cosine above which two criteria count as near-duplicates.
        encoder: texts -> embeddings; None uses the packaged MiniLM.
        duplicates: False skips the embedding pass (text rules only).
    """
    if not 0.0 < threshold <= 1.0:
        raise ValueError(f"threshold must be in (0, 1], got {threshold!r}")
    issues = text_issues(tree) + fault_issues(tree)
    if duplicates:
        issues += duplicate_issues(tree, threshold, encoder)
    return sorted(issues, key=lambda i: (i.kind, i.node, i.other or ""))
