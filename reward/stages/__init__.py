"""Stage rewards: the Fathom-Vaidya stage 1-3 rewards on top of the judge, the tree and routers.

``mcq`` (stage 1 rule reward), ``error_rubric`` (stage 2), ``rubric_reward`` (stage 3, the routed
tree and row items), ``row_rubrics`` (stage 3 on the row's items alone, per-axis diagnostics) and
``rollout_text`` (reading trainer-shaped rollouts). Nothing here imports a trainer; the adapters
in ``reward.integrations`` wrap these for TRL and verl.
"""
