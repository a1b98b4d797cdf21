"""Proposal builders shared by the taxonomy-evolution tests."""

from reward.evolution.proposals import NodeDraft, Proposal


def leaf(pid: str, nid: str, parents: list[str], decision: str = "accept") -> Proposal:
    """A lint-clean leaf proposal with a travel-clinic criterion under ``parents``."""
    return Proposal(id=pid, decision=decision, parents=parents,
                    node=NodeDraft(id=nid, title=f"Title {nid}", trigger="When travel abroad is planned.",
                                   criterion=f"If the user plans travel abroad, advises a travel clinic visit weeks "
                                             f"before departure ({nid})."))
