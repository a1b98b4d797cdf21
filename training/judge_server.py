"""How the judge's vLLM server is sized: the ``judge_server:`` block of a training config and the
``vllm serve`` arguments it becomes (``scripts/serve_judge.sh``). ``training.memory_plan`` counts
its memory; ``training.trl_config`` validates the block."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

__all__ = ["JudgeServer", "judge_vllm_args"]


class JudgeServer(BaseModel):
    """How the judge's vLLM server is sized (``judge_server:`` in a TRL config)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    tensor_parallel_size: int | None = Field(None, ge=1, description="default: the judge's GPU count")
    max_model_len: int = Field(16384, ge=256, description="judge prompt + verdict tokens")
    gpu_memory_utilization: float = Field(0.9, gt=0.0, le=1.0)
    quantization: str | None = Field(None, description="e.g. fp8 (halves the weights)")
    min_sequences: int = Field(4, ge=1, description="contexts of max_model_len the KV cache must hold at once")
    extra_args: list[str] = Field(default_factory=list, description="more `vllm serve` arguments")


def judge_vllm_args(j: JudgeServer, judge_gpus: int) -> list[str]:
    """The `vllm serve` arguments that size the judge as planned (scripts/serve_judge.sh `--`)."""
    args = ["--tensor-parallel-size", str(j.tensor_parallel_size or max(1, judge_gpus)),
            "--max-model-len", str(j.max_model_len), "--gpu-memory-utilization", str(j.gpu_memory_utilization)]
    if j.quantization:
        args += ["--quantization", j.quantization]
    return args + list(j.extra_args)
