"""The rollout inspector: one self-contained HTML page that shows why each rollout got its reward.

``rubricstree inspect SCORES.jsonl [--rollouts ROLLOUTS.jsonl] [--compare OTHER.jsonl] --out DIR``
writes ``DIR/inspector.html``. :mod:`training.inspector.data` reads the score records (and the
rollouts they were scored from, for the prompt and the completion), computes the per-leaf
statistics of the file (routed, met, failed, uncertain), :mod:`training.inspector.attribution`
what explains each score (each leaf's contribution: its Shapley value over the reward's own
rescoring, :mod:`training.inspector.shapley`, so a fault group's price is shared by its failed
members; the group view of advantages; the share of the within-group variance; what changed
between two runs),
and :mod:`training.inspector.pack` packs everything into compact JSON with a string table; :mod:`training.inspector.page` embeds that
JSON in the packaged ``page.html`` template, whose script renders the table and a rollout's
details on demand. See ``docs/inspector.md`` for what each figure means.
"""

from __future__ import annotations

from training.inspector.attribution import compare_groups, group_view, leaf_variance_shares
from training.inspector.data import load_run
from training.inspector.pack import build_data
from training.inspector.page import write_inspector, write_page

__all__ = ["build_data", "compare_groups", "group_view", "leaf_variance_shares", "load_run", "write_inspector",
           "write_page"]
