"""A memoising sentence encoder shared by the coverage matcher, the embedding router and the
proposal clustering.

Evolution evaluates the same texts many times (every candidate taxonomy re-routes the same
conversations and re-matches the same rubric items against mostly unchanged leaves), so each
distinct text is encoded once per process and its unit vector reused. The object quacks like a
sentence-transformers model (``encode(texts, normalize_embeddings=True, ...)``), which is what
:class:`reward.router.EmbeddingRouter` accepts as ``model``.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from reward.router.embedding import DEFAULT_MODEL_NAME, load_default_model


class CachedEncoder:
    """Encode texts to unit vectors, each distinct text once.

    Args:
        model: a sentence-transformers model (or anything with its ``encode``); None loads the
            packaged all-MiniLM-L6-v2 offline on first use.
        name: a stable name for the model (part of cache keys and reports).
    """

    def __init__(self, model: Any = None, name: str = DEFAULT_MODEL_NAME) -> None:
        self._model = model
        self.name = name
        self._memo: dict[str, Any] = {}
        self._lock = threading.Lock()

    @property
    def model(self) -> Any:
        if self._model is None:
            self._model = load_default_model()
        return self._model

    def encode(self, texts: Sequence[str], normalize_embeddings: bool = True, batch_size: int = 64,
               show_progress_bar: bool = False, convert_to_numpy: bool = True, **_: Any):
        """Unit vectors of ``texts`` as a (len(texts), dim) float32 array."""
        import numpy as np

        if not normalize_embeddings:
            raise ValueError("CachedEncoder only returns normalised embeddings")
        texts = list(texts)
        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if t not in self._memo]
            if missing:
                vecs = self.model.encode(missing, normalize_embeddings=True, batch_size=batch_size,
                                         show_progress_bar=show_progress_bar, convert_to_numpy=True)
                for t, v in zip(missing, vecs):
                    self._memo[t] = np.asarray(v, dtype=np.float32)
            if not texts:
                dim = next(iter(self._memo.values())).shape[0] if self._memo else 0
                return np.zeros((0, dim), dtype=np.float32)
            return np.stack([self._memo[t] for t in texts])
