"""Routers: choose, once per prompt, the rubric-tree leaves worth grading.

``llm`` walks the tree with the judge, ``embedding`` with sentence-embedding similarity,
``static`` takes all leaves or a tag selection. :class:`CachedRouter` makes any of them route
each distinct prompt once (memory, then the durable verdict cache). Importing this package
registers the three routers; the embedding model and torch are loaded only when used.
"""

from typing import Any

from reward.router.base import (
                                ROUTERS,
                                ActiveLeaf,
                                CachedRouter,
                                Router,
                                Routing,
                                as_conversation,
                                register_router,
                                routing_key,
                                tree_fingerprint,
)
from reward.router.embedding import EmbeddingRouter
from reward.router.llm import LLMTreeRouter
from reward.router.static import StaticRouter
from reward.tree.graph import RubricTree

__all__ = ["ROUTERS", "ActiveLeaf", "CachedRouter", "EmbeddingRouter", "LLMTreeRouter", "Router",
           "Routing", "StaticRouter", "as_conversation", "make_router", "register_router",
           "routing_key", "tree_fingerprint"]


def make_router(name: str, tree: RubricTree, **kwargs: Any) -> Router:
    """Build a registered router by name (``llm``, ``embedding``, ``static``; importing this
    package has registered them)."""
    if name not in ROUTERS:
        raise ValueError(f"unknown router '{name}'; known: {', '.join(sorted(ROUTERS))}")
    return ROUTERS[name](tree, **kwargs)
