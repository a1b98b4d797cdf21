"""Review proposals: accept, reject or edit each one, in the terminal or from the file's marks.

Interactive review walks the pending proposals one at a time through two callables (the CLI
passes typer's prompt and echo; tests pass a script), and saves the file after every decision,
so a review stopped halfway resumes where it stopped. Non-interactive review reads the
``decision:`` fields as marked in the YAML. Both end with :func:`check`, a dry run of the apply
step that lists the accepted proposals the tree would refuse, and :func:`summary`, which says
what coverage the accepted set is predicted to reach.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from reward.evolution.apply import Refusal, apply_proposals
from reward.evolution.proposals import Proposal, ProposalsFile, save_proposals
from reward.tree.graph import RubricTree

Ask = Callable[[str, str], str]
Show = Callable[[str], None]
EDITABLE = ("id", "title", "trigger", "criterion", "polarity", "grounding", "parent")


def describe(p: Proposal) -> str:
    """A proposal as the reviewer reads it."""
    lines = [f"[{p.id}] {p.kind} ({p.drafted_by}), decision: {p.decision}"]
    if p.node is not None:
        n = p.node
        lines += [f"  id:        {n.id}", f"  title:     {n.title}", f"  trigger:   {n.trigger or '(none)'}",
                  f"  criterion: {n.criterion}", f"  polarity:  {n.polarity}", f"  grounding: {n.grounding}"]
    if p.parents:
        alts = ", ".join(f"{a['id']} ({a['similarity']})" for a in p.placement_alternatives)
        lines.append(f"  parent:    {', '.join(p.parents)}" + (f"   alternatives: {alts}" if alts else ""))
    if p.target:
        lines.append(f"  target:    {p.target} {p.from_parent or ''} -> {p.to_parent or ''}")
    if p.predicted is not None:
        pr = p.predicted
        lines.append(f"  predicted: +{pr.marginal_gain:.4f} coverage (alone +{pr.gain_alone:.4f}),"
                     f" cumulative {pr.cumulative_coverage:.4f}, score {pr.score:+.4f}"
                     + (", recommended" if p.recommended else ", not recommended") + (" (stale)" if pr.stale else ""))
    ev = p.evidence
    if ev.n_items:
        lines.append(f"  evidence:  {ev.n_items} uncovered items, {ev.points:g} points, {len(ev.rows)} conversations")
        lines += [f"    - {t[:160]}" for t in ev.items[:4]]
    lines += [f"  lint:      {x}" for x in p.lint]
    if p.note:
        lines.append(f"  note: {p.note}")
    return "\n".join(lines)


def edit(p: Proposal, field: str, value: str) -> Proposal:
    """``p`` with one field changed; its prediction is marked stale (it was made for the old text)."""
    if field not in EDITABLE:
        raise ValueError(f"cannot edit '{field}'; editable: {', '.join(EDITABLE)}")
    if field == "parent":
        upd: dict[str, Any] = {"parents": [x.strip() for x in value.split(",") if x.strip()]}
    else:
        if p.node is None:
            raise ValueError(f"proposal {p.id} has no node to edit")
        if field == "polarity" and value not in ("positive", "negative"):
            raise ValueError("polarity must be positive or negative")
        upd = {"node": p.node.model_copy(update={field: value})}
    if p.predicted is not None:
        upd["predicted"] = p.predicted.model_copy(update={"stale": True})
    return Proposal.model_validate({**p.model_dump(), **{k: (v.model_dump() if hasattr(v, "model_dump") else v)
                                                         for k, v in upd.items()}})


def review_interactive(doc: ProposalsFile, path: str | Path, ask: Ask, show: Show) -> ProposalsFile:
    """Decide each pending proposal with ``ask(question, default)``; save after each decision.

    Answers: ``a``ccept, ``r``eject, ``e``dit (then field by field, Enter keeps a value), ``s``kip
    (stays pending), ``q``uit (stop here; the file keeps what was decided)."""
    props = list(doc.proposals)
    for k, p in enumerate(props):
        if p.decision != "pending":
            continue
        while True:
            show(describe(p))
            ans = ask("accept, reject, edit, skip or quit? [a/r/e/s/q]", "s").strip().lower()[:1]
            if ans == "e":
                for field in EDITABLE:
                    cur = (", ".join(p.parents) if field == "parent"
                           else str(getattr(p.node, field, "") or "") if p.node else "")
                    if field != "parent" and p.node is None:
                        continue
                    new = ask(f"  {field}", cur)
                    if new != cur:
                        try:
                            p = edit(p, field, new)
                        except ValueError as exc:
                            show(f"  not changed: {exc}")
                continue
            if ans in ("a", "r"):
                p = p.model_copy(update={"decision": "accept" if ans == "a" else "reject"})
            if ans in ("a", "r", "s", "q"):
                break
            show("  answer a, r, e, s or q")
        props[k] = p
        doc = doc.model_copy(update={"proposals": props})
        save_proposals(doc, path)
        if ans == "q":
            break
    return doc


def accept_recommended(doc: ProposalsFile) -> ProposalsFile:
    """Scripted review: pending proposals ranked above lambda are accepted, the other pending ones
    rejected; decisions already made are kept."""
    props = [p if p.decision != "pending" else p.model_copy(update={"decision": "accept" if p.recommended else "reject"})
             for p in doc.proposals]
    return doc.model_copy(update={"proposals": props})


def check(doc: ProposalsFile, tree: RubricTree) -> list[Refusal]:
    """The accepted proposals the tree would refuse, with reasons (a dry run of apply)."""
    return apply_proposals(tree, doc.proposals).refused


def summary(doc: ProposalsFile) -> dict[str, Any]:
    """Decisions and the coverage predicted for the accepted set.

    The prediction is exact when the accepted proposals are the first k of the ranking, unedited;
    otherwise it is the baseline plus their marginal gains, an estimate (gains overlap)."""
    props = doc.proposals
    accepted = [p for p in props if p.decision == "accept"]
    k = len(accepted)
    prefix = [p.id for p in props[:k]] == [p.id for p in accepted]
    exact = prefix and all(p.predicted is not None and not p.predicted.stale for p in accepted)
    base = doc.baseline.get("coverage")
    if k == 0 or base is None:
        predicted = base
    elif exact:
        predicted = accepted[-1].predicted.cumulative_coverage  # type: ignore[union-attr]
    else:
        predicted = base + sum(p.predicted.marginal_gain for p in accepted if p.predicted is not None)
    return {"accepted": [p.id for p in accepted], "rejected": [p.id for p in props if p.decision == "reject"],
            "pending": [p.id for p in props if p.decision == "pending"], "baseline_coverage": base,
            "predicted_coverage": predicted, "prediction_exact": exact if k else True}
