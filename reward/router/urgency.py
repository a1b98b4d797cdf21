"""Urgency for the embedding router: does the user describe an emergency?

A zero-shot contrast with descriptions of our own (:data:`EMERGENCY_DESCRIPTIONS`,
:data:`ROUTINE_DESCRIPTIONS`), read from the user's whole turns: the best similarity to an
emergency minus the best similarity to a routine request, through a logistic
(``sigmoid(diff / URGENCY_TEMPERATURE)``). The router embeds; this module only decides, so it
needs numpy and nothing else.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

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
    "Suddenly sweaty, shaking and confused right now, not making sense.",
)
ROUTINE_DESCRIPTIONS = (
    "A mild cold, sore throat, cough or runny nose.",
    "A general question about healthy eating, exercise, weight or sleep.",
    "A question about lab test results, blood sugar, cholesterol or health data from a watch.",
    "A question about a medicine's usual dose, timing or side effects.",
    "Minor aches, pains, rashes or skin problems that have lasted a while.",
    "Wanting to understand a diagnosis, condition or how the body works.",
    "A routine question in pregnancy or while breastfeeding: diet, vitamins, exercise, what is safe to take.",
    "A mild fever with a cold in someone who is otherwise well, eating and playing normally.",
)
URGENCY_TEMPERATURE = 0.05
# Urgency from which the safety branches get the emergency threshold (the contrast's midpoint).
# A higher cut-off (0.8) flags fewer HealthBench-Hard rows but halves urgency recall on the
# labelled set (0.35 against 0.71), and a missed emergency costs more than a few extra safety
# checks: measured by ``rubricstree route eval`` (docs/routing.md).
URGENCY_CUTOFF = 0.5
# Relevance a later user turn's best match to an emergency description needs to count as evidence
# of urgency (the opening turn always counts): the bar a leaf meets to be routed with the defaults (leaf_ratio 0.8 x threshold 0.65;
# cosine 0.31 on MiniLM's scale), fixed here so that retuning the routing does not move urgency.
# A short follow-up ("Thanks.", "What now?") matches the emergencies at cosine 0.05-0.25.
URGENCY_EVIDENCE = 0.52


def urgency_of(turns: Any, em: Any, rt: Any, to_scale: Callable[[float], float], evidence_cos: float,
               temperature: float = URGENCY_TEMPERATURE) -> float:
    """The urgency in [0, 1] of a prompt whose whole user turns are embedded, in order, as the
    rows of ``turns`` (``em``/``rt``: the emergency and routine descriptions, embedded by the same
    encoder; ``to_scale`` maps that encoder's cosines onto MiniLM's scale, ``evidence_cos`` is on
    that scale): the largest contrast (best similarity to an emergency description - best
    similarity to a routine request) over the opening turn and the later turns that match an
    emergency description at least at ``evidence_cos`` (the router's ``urgency_evidence``
    relevance, cosine 0.31 with the defaults, the bar a leaf meets to be routed).

    - The opening turn states the situation and always counts, short or not, in any language
      ("my lips are blue", "Il ne se réveille pas"). A bar on it was tried: it removed 10 false
      alarms on the Hard rows (vaccine schedules, a sweetener) but read short and non-English
      emergencies as routine (their match sits at cosine 0.16-0.29, in the band of "Thanks.").
    - A later turn with little content ("Thanks.", "What now?", "Great, can you draft it?",
      "Vale.") sits near nothing (cosine 0.05-0.25 to the emergency descriptions), yet slightly
      nearer their pressing tone than the routine requests (+0.04 to +0.12): as the largest
      contrast it made follow-ups urgent (0.81 for "What now?" after a request for a running
      plan). A later turn that does describe an emergency passes the bar (a swallowed-pills turn
      after a meal-planning one: 0.996); a short one may not ("my lips are blue" as a follow-up).
    - The router passes no context (the user's records): a normal 30-day blood-pressure log read
      as urgency 0.84 and closed the routine guards of a lifestyle question. The price: an
      emergency stated only in the records ("glucose 2.1 mmol/L now" with "What do you make of
      this?") is not flagged here; its critical leaves still route on their own match through the
      safety net, which reads the context.
    - No user turn with words: routine (contrast -1, urgency about 0)."""
    import numpy as np

    diff = -1.0
    if len(turns):
        best_em, best_rt = (turns @ em.T).max(axis=1), (turns @ rt.T).max(axis=1)
        evidence = np.asarray([to_scale(x) for x in best_em]) >= evidence_cos
        evidence[0] = True  # the opening turn states the situation: it always counts
        if evidence.any():
            diff = float((best_em - best_rt)[evidence].max())
    return float(1.0 / (1.0 + np.exp(-diff / temperature)))
