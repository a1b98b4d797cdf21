"""Group uncovered rubric items into candidate topics for new leaves.

Items are embedded (the shared encoder), identical criteria merged, and grouped by agglomerative
clustering with average linkage on cosine distance, cut at ``1 - similarity``: two groups merge
while their items are, on average, at least ``similarity`` alike. Each cluster's representative
is its medoid (the item with the highest points-weighted mean similarity to the others), which
the offline drafter turns into a leaf. Clusters come heaviest first (total points).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from reward.evolution.coverage import ItemCoverage
from reward.evolution.encoder import CachedEncoder


@dataclass
class Cluster:
    """Uncovered items that look alike; ``items[0]`` is the representative."""

    items: list[ItemCoverage]
    centroid: Any = field(repr=False)

    @property
    def points(self) -> float:
        return sum(i.points for i in self.items)

    @property
    def rows(self) -> list[str]:
        return sorted({i.row for i in self.items})


def cluster_items(items: Sequence[ItemCoverage], encoder: CachedEncoder, similarity: float = 0.6) -> list[Cluster]:
    """Cluster ``items`` (see the module docstring); ``similarity`` is a cosine in (0, 1)."""
    import numpy as np

    if not 0.0 < similarity < 1.0:
        raise ValueError(f"cluster similarity must be in (0, 1), got {similarity!r}")
    if not items:
        return []
    texts = list(dict.fromkeys(i.criterion for i in items))
    emb = encoder.encode(texts)
    if len(texts) == 1:
        labels = np.zeros(1, dtype=int)
    else:
        from sklearn.cluster import AgglomerativeClustering

        labels = AgglomerativeClustering(n_clusters=None, metric="cosine", linkage="average",
                                         distance_threshold=1.0 - similarity).fit_predict(emb)
    by_text = {t: [i for i in items if i.criterion == t] for t in texts}
    clusters = []
    for lab in sorted(set(labels.tolist())):
        idx = [k for k, x in enumerate(labels) if x == lab]
        pts = np.array([sum(i.points for i in by_text[texts[k]]) for k in idx], dtype=float)
        sub = emb[idx]
        sims = sub @ sub.T
        score = (sims * pts[None, :]).sum(axis=1) / pts.sum()
        order = sorted(range(len(idx)), key=lambda k: (-score[k], -pts[k], texts[idx[k]]))
        members = [it for k in order for it in by_text[texts[idx[k]]]]
        centroid = sub.mean(axis=0)
        clusters.append(Cluster(items=members, centroid=centroid / (np.linalg.norm(centroid) or 1.0)))
    return sorted(clusters, key=lambda c: (-c.points, c.items[0].criterion))
