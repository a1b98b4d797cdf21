"""Trainer adapters: thin wrappers of ``reward.stages`` for TRL (``trl``) and verl (``verl/``).

No adapter holds logic that another adapter or ``training`` imports: shared code lives in
``reward.stages``, ``reward.settings`` and ``reward.runtime``.
"""
