"""The rubric tree: schema, DAG validation, auto-weights and the YAML loader."""

from reward.tree.graph import RubricTree
from reward.tree.loader import default_taxonomy_path, load_tree
from reward.tree.schema import LeafTags, Node

__all__ = ["LeafTags", "Node", "RubricTree", "default_taxonomy_path", "load_tree"]
