"""A causal LM's architecture dimensions, for memory planning (:mod:`training.memory_plan`).

Data flow: a model name or path -> its ``config.json`` (a local folder) or the built-in Qwen3
table (names matched on the last path part, e.g. ``Qwen/Qwen3-8B`` or ``/ckpt/Qwen3-8B``) ->
:class:`ModelDims` -> parameter counts and KV-cache bytes per token. No torch, no network.
The table's numbers are the published Qwen3 ``config.json`` values.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from reward.errors import InputError

__all__ = ["QWEN3", "ModelDims", "model_dims"]


class ModelDims(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    layers: int = Field(ge=1)
    hidden: int = Field(ge=1)
    heads: int = Field(ge=1)
    kv_heads: int = Field(ge=1)
    head_dim: int = Field(ge=1)
    intermediate: int = Field(ge=1, description="dense MLP width (MoE: unused when every layer is MoE)")
    vocab: int = Field(ge=1)
    tied_embeddings: bool = False
    experts: int = Field(0, ge=0, description="MoE experts per layer; 0: dense")
    experts_per_token: int = Field(0, ge=0)
    moe_intermediate: int = Field(0, ge=0)

    def layer_params(self) -> int:
        attn = self.hidden * self.head_dim * (2 * self.heads + 2 * self.kv_heads) + 2 * self.head_dim
        if self.experts:
            mlp = self.experts * 3 * self.hidden * self.moe_intermediate + self.hidden * self.experts
        else:
            mlp = 3 * self.hidden * self.intermediate
        return attn + mlp + 2 * self.hidden

    def params(self) -> int:
        embed = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.layer_params() + embed + self.hidden

    def active_mlp_width(self) -> int:
        """MLP width one token goes through (MoE: the routed experts')."""
        return self.experts_per_token * self.moe_intermediate if self.experts else self.intermediate

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


def _q(name, layers, hidden, heads, kv, inter, tied, experts=0, top_k=0, moe_inter=0) -> ModelDims:
    return ModelDims(name=name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, head_dim=128,
                     intermediate=inter, vocab=151936, tied_embeddings=tied, experts=experts,
                     experts_per_token=top_k, moe_intermediate=moe_inter)


QWEN3: dict[str, ModelDims] = {d.name.lower(): d for d in (
    _q("Qwen3-0.6B", 28, 1024, 16, 8, 3072, True),
    _q("Qwen3-1.7B", 28, 2048, 16, 8, 6144, True),
    _q("Qwen3-4B", 36, 2560, 32, 8, 9728, True),
    _q("Qwen3-8B", 36, 4096, 32, 8, 12288, False),
    _q("Qwen3-14B", 40, 5120, 40, 8, 17408, False),
    _q("Qwen3-32B", 64, 5120, 64, 8, 25600, False),
    _q("Qwen3-30B-A3B", 48, 2048, 32, 4, 6144, False, experts=128, top_k=8, moe_inter=768),
)}


def _from_config(path: Path) -> ModelDims:
    try:
        c = json.loads(path.read_text(encoding="utf-8"))
        c = c.get("text_config", c)
        heads = int(c["num_attention_heads"])
        hidden = int(c["hidden_size"])
        return ModelDims(
            name=path.parent.name, layers=int(c["num_hidden_layers"]), hidden=hidden, heads=heads,
            kv_heads=int(c.get("num_key_value_heads") or heads),
            head_dim=int(c.get("head_dim") or hidden // heads), intermediate=int(c["intermediate_size"]),
            vocab=int(c["vocab_size"]), tied_embeddings=bool(c.get("tie_word_embeddings", False)),
            experts=int(c.get("num_experts") or c.get("num_local_experts") or 0),
            experts_per_token=int(c.get("num_experts_per_tok") or 0),
            moe_intermediate=int(c.get("moe_intermediate_size") or 0))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"cannot read the architecture: {exc}", file=str(path)) from exc


def model_dims(model: str) -> ModelDims:
    """The dimensions of ``model``: its local ``config.json``, else the Qwen3 table by name."""
    cfg = Path(model) / "config.json"
    if cfg.is_file():
        return _from_config(cfg)
    base = model.rstrip("/").split("/")[-1].lower()
    base = re.sub(r"-(instruct|base|fp8|awq|gptq.*|\d{4})$", "", base)
    if base in QWEN3:
        return QWEN3[base]
    raise InputError(f"unknown model {model!r}: give a folder with config.json or one of "
                     + ", ".join(d.name for d in QWEN3.values()), field="model")
