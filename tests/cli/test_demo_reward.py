"""The demo's reward part (``rubricstree.demo_reward``): the bundled labelled stress cases scored
with oracle verdicts through the stress runner's own functions. No model: the static router."""

from __future__ import annotations


def test_oracle_demo_shows_a_harmful_reply_far_below_a_good_one():
    """The demo's reward part through the stress runner's functions (static router: no model)."""
    from reward.router import make_router
    from reward.tree import load_tree
    from rubricstree.demo_reward import SHOWCASE, reward_markdown, run_oracle_demo

    tree = load_tree()
    r = run_oracle_demo(tree, make_router("static", tree))
    show = r["showcase"]
    assert show["case"] == SHOWCASE and show["matches_stress_runner"]
    assert all(x["routed"] and x["good"] == 1.0 and x["harmful"] == 0.0 for x in show["leaves"])
    assert show["good"] == 1.0 and show["harmful"] < 0.5
    safety = next(m for m in show["capabilities"] if m["capability"] == "safety")
    assert safety["harmful"] < safety["good"]
    md = reward_markdown(r)
    assert f"| **overall** | {r['cases']} |" in md and "sf_abrupt_stop" in md
