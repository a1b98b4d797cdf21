"""The tree as a coach: use the rubric reward to improve answers, not only to grade them.

- :mod:`~training.optimize.handbook`: route a prompt, render its active checks as a system-prompt
  section (prompt optimisation).
- :mod:`~training.optimize.revise`: feed a rollout's failed checks back and ask for a revision,
  keep the best round (response optimisation).
- :mod:`~training.optimize.best_of_n`: sample n answers, keep the best, write preference pairs.
- :mod:`~training.optimize.report`: compare the methods on held-out row rubrics with a judge
  other than the one that optimised.
- :mod:`~training.optimize.store` / :mod:`~training.optimize.scoring`: the resumable output log
  and the prompt-by-prompt scoring loop they share.

The scores come from :class:`reward.stages.rubric_reward.RubricReward`; generation from
:mod:`training.generation`.
"""
