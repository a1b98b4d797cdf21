"""Routers: choose, once per prompt, the rubric-tree leaves worth grading.

``llm`` walks the tree with the judge, ``embedding`` with sentence-embedding similarity,
``static`` takes all leaves or a tag selection. :class:`CachedRouter` makes any of them route
each distinct prompt once (memory, then the durable verdict cache). Importing this package
registers the three routers; the embedding model and torch are loaded only when used.
"""

from reward.router.base import (
                                ROUTERS,
                                ActiveLeaf,
                                CachedRouter,
                                Router,
                                Routing,
                                as_conversation,
                                make_router,
                                register_router,
                                routing_key,
                                tree_fingerprint,
)
from reward.router.embedding import EmbeddingRouter
from reward.router.llm import LLMTreeRouter
from reward.router.static import StaticRouter

__all__ = ["ROUTERS", "ActiveLeaf", "CachedRouter", "EmbeddingRouter", "LLMTreeRouter", "Router",
           "Routing", "StaticRouter", "as_conversation", "make_router", "register_router",
           "routing_key", "tree_fingerprint"]
