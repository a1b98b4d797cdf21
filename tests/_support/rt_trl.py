"""The mini tree, keyword judge and metric log shared by the TRL adapter tests."""

from rt_fakes import FakeJudge

from reward.judge.templates import RELEVANCE, URGENCY
from reward.tree import LeafTags, Node, RubricTree


class Log:
    def __init__(self) -> None:
        self.calls: list[tuple[str, float]] = []

    def __call__(self, name: str, value: float) -> None:
        self.calls.append((name, value))

    @property
    def d(self) -> dict[str, float]:
        return dict(self.calls)


CRIT = {"ems": "Advises calling emergency services now.", "empathy": "Acknowledges the user's worry.",
        "wait": "Suggests waiting at home."}
KEYWORDS = {CRIT["ems"]: "emergency", CRIT["empathy"]: "understand", CRIT["wait"]: "wait",
            "Mentions aspirin.": "aspirin", "Says it is nothing.": "nothing"}


def _tree() -> RubricTree:
    return RubricTree([
        Node(id="root", title="root", children=("safety", "communication")),
        Node(id="safety", title="Safety", children=("ems", "wait")),
        Node(id="communication", title="Communication", children=("empathy",)),
        Node(id="ems", title="EMS", criterion=CRIT["ems"], tags=LeafTags(axis="accuracy")),
        Node(id="wait", title="Wait", criterion=CRIT["wait"], polarity="negative", tags=LeafTags(axis="accuracy")),
        Node(id="empathy", title="Empathy", criterion=CRIT["empathy"], tags=LeafTags(axis="communication_quality")),
    ], root="root", name="mini")


def keyword_judge(**kw) -> FakeJudge:
    def decide(template, item):
        if template.name in (RELEVANCE.name, URGENCY.name):
            return 1.0
        if "crash" in item.response:
            raise RuntimeError("judge down")
        return 1.0 if KEYWORDS[item.criterion] in item.response.lower() else 0.0

    return FakeJudge.consistent(decide, **kw)


CHEST = [{"role": "user", "content": "Crushing chest pain, sweating. What now?"}]
RUBRICS = [{"criterion": "Mentions aspirin.", "points": 5.0, "tags": ["axis:completeness"]},
           {"criterion": "Says it is nothing.", "points": -5.0, "tags": ["axis:accuracy"]},
           {"criterion": CRIT["ems"], "points": 5.0, "tags": ["axis:accuracy"]}]
GOOD = "I understand. Call emergency services now and chew an aspirin."
POOR = "It is nothing, wait and see."
