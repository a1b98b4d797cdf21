"""The small DAG and conversation the router tests walk."""

from reward.judge import Message
from reward.tree import Node, RubricTree


def _tree() -> RubricTree:
    """root -> A, B;  A -> a1, A2;  A2 -> a21, shared;  B -> b1, shared, b_safe (always on)."""
    def inner(i, children):
        return Node(id=i, title=i, definition=f"about {i}", children=tuple(children))

    def leaf(i, **kw):
        return Node(id=i, title=i, definition=f"about {i}", criterion=f"criterion {i}", **kw)

    return RubricTree([
        inner("root", ["A", "B"]), inner("A", ["a1", "A2"]), inner("A2", ["a21", "shared"]),
        inner("B", ["b1", "shared", "b_safe"]),
        leaf("a1", tags={"axis": "accuracy", "scenarios": ["symptoms"], "themes": ["emergency_referrals"]}),
        leaf("a21", tags={"axis": "completeness", "scenarios": ["health_data"]}),
        leaf("shared", tags={"axis": "accuracy", "scenarios": ["health_data", "explanation"]}),
        leaf("b1", tags={"axis": "communication_quality", "themes": ["communication"]}),
        leaf("b_safe", polarity="negative", always_on=True),
    ], root="root", name="mini")


CONV = (Message(role="user", content="my question"),)
