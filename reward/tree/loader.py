"""Load a rubric tree from YAML, validating every node with an error that names where it is."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

import yaml
from pydantic import ValidationError

from reward.errors import TaxonomyError
from reward.textio import load_yaml
from reward.tree.graph import RubricTree
from reward.tree.schema import FaultGroup, Node, TaxonomyFile

DEFAULT_TAXONOMY = "taxonomy.yaml"


def default_taxonomy_path() -> Path:
    """The taxonomy shipped in the package (``reward/data/taxonomy.yaml``)."""
    return Path(str(resources.files("reward") / "data" / DEFAULT_TAXONOMY))


def load_tree(path: str | Path | None = None) -> RubricTree:
    """Load and validate a taxonomy; ``None`` loads the packaged default."""
    path = Path(path) if path is not None else default_taxonomy_path()
    src = str(path)
    if not path.exists():
        raise TaxonomyError("file not found", file=src)
    try:
        raw = load_yaml(path)
    except (yaml.YAMLError, RecursionError) as exc:
        raise TaxonomyError(f"invalid YAML: {exc}", file=src) from exc
    if not isinstance(raw, dict):
        raise TaxonomyError("top level must be a mapping with 'root' and 'nodes'", file=src)
    try:
        doc = TaxonomyFile.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise TaxonomyError(first["msg"], file=src,
                            field=".".join(str(p) for p in first["loc"])) from exc
    nodes = []
    for i, item in enumerate(doc.nodes):
        ref = item.get("id", f"#{i}") if isinstance(item, dict) else f"#{i}"
        try:
            nodes.append(Node.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise TaxonomyError(first["msg"], file=src, record=ref,
                                field=".".join(str(p) for p in first["loc"]) or None) from exc
    faults = []
    for i, item in enumerate(doc.faults):
        ref = f"fault {item.get('id', f'#{i}')}" if isinstance(item, dict) else f"fault #{i}"
        try:
            faults.append(FaultGroup.model_validate(item))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise TaxonomyError(first["msg"], file=src, record=ref,
                                field=".".join(str(p) for p in first["loc"]) or None) from exc
    return RubricTree(nodes, doc.root, name=doc.name, source=src, faults=faults)
