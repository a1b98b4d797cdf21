"""Over-escalation priced against the prompt's urgency (issue 46).

Sending a clearly minor complaint to the emergency department is a fault (``sf_over_escalation``,
routed on the prompts the router reads as routine); how much it costs depends on how sure that
reading is. The router's urgency ``u`` (its estimate that the prompt may need emergency care, in
[0, 1]) scales the fault's price by ``1 - u``: on a prompt read as plainly routine an escalation
costs its full price, on one the router was unsure about less, so a policy gains nothing by
escalating and loses little when the call was close. Every place that scores (the reward, the
rescorer, the stress test) takes the scale from here.
"""

from __future__ import annotations

from collections.abc import Mapping

OVER_ESCALATION = "sf_over_escalation"


def price_scale(urgency: float | None) -> dict[str, float]:
    """The price scale of the urgency-priced leaves for a prompt of ``urgency`` (None: unknown,
    full price)."""
    if urgency is None:
        return {}
    return {OVER_ESCALATION: min(1.0, max(0.0, 1.0 - float(urgency)))}


def price_scale_of(routing_info: Mapping | None) -> dict[str, float]:
    """:func:`price_scale` of a recorded routing (``RolloutScore.routing``)."""
    return price_scale((routing_info or {}).get("urgency"))
