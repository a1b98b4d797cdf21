"""Two-process FSDP2 worker on CPU (gloo) for tests/training/test_hf_export.py; run with torchrun.

Shards the tiny Qwen3 as configs/accelerate/fsdp2.yaml does (each decoder layer, then the root;
bf16 compute over fp32 parameters, the gradient reduction dtype from argv), trains two optimiser
steps of two accumulated micro-batches each with the given sync mode, then exports it with
training.hf_export and writes a JSON report (rank 0) with each parameter's full fp32 value
(a checksum per tensor) and the gradient facts the tests compare.

    torchrun --nproc_per_node 2 rt_fsdp2_worker.py MODEL OUT REPORT --reduce float32 --sync each
"""

from __future__ import annotations

import argparse
import json

import torch
import torch.distributed as dist


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("out")
    p.add_argument("report")
    p.add_argument("--reduce", default="float32", choices=["float32", "bfloat16"])
    p.add_argument("--sync", default="each", choices=["each", "last"])
    p.add_argument("--dtype", default="float32")
    a = p.parse_args()
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    torch.manual_seed(0)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.hf_export import full_state_dict, save_hf

    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(a.model)
    mp = MixedPrecisionPolicy(param_dtype=torch.bfloat16, reduce_dtype=getattr(torch, a.reduce),
                              output_dtype=torch.bfloat16)
    for layer in model.model.layers:
        fully_shard(layer, mp_policy=mp, reshard_after_forward=True)
    fully_shard(model, mp_policy=mp, reshard_after_forward=True)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    g = torch.Generator().manual_seed(1 + rank)
    facts = {"unsharded_grad_bytes_between_micro_batches": 0, "grad_dtypes": []}
    for _step in range(2):
        for micro in range(2):
            last = micro == 1
            model.set_requires_gradient_sync(a.sync == "each" or last)
            x = torch.randint(3, 3000, (2, 12), generator=g)
            out = model(input_ids=x, labels=x)
            out.loss.backward()
            if not last:
                # what a no-sync accumulation keeps between micro-batches: FSDP2 holds the
                # unsharded gradients (the full tensors) until it reduces
                for prm in model.parameters():
                    if prm.grad is not None:
                        local = prm.grad.to_local() if hasattr(prm.grad, "to_local") else prm.grad
                        facts["unsharded_grad_bytes_between_micro_batches"] += 0 if hasattr(prm.grad, "to_local") \
                            else local.numel() * local.element_size()
                unsharded = getattr(model, "_get_fsdp_state", None)
                for mod in model.modules():
                    st = getattr(mod, "_get_fsdp_state", None)
                    if st is None:
                        continue
                    pg = st()._fsdp_param_group
                    if pg is None:
                        continue
                    for fp in pg.fsdp_params:
                        ug = getattr(fp, "unsharded_accumulated_grad", None)
                        if ug is None:
                            ug = fp.unsharded_param.grad if fp.unsharded_param is not None else None
                        if ug is not None:
                            facts["unsharded_grad_bytes_between_micro_batches"] += ug.numel() * ug.element_size()
                del unsharded
        facts["grad_dtypes"] = sorted({str(prm.grad.dtype) for prm in model.parameters() if prm.grad is not None})
        opt.step()
        opt.zero_grad()
    # the in-memory weights, gathered for comparison (every rank takes part)
    full = {n: prm.full_tensor().detach().float().clone() for n, prm in model.named_parameters()}
    sd = full_state_dict(None, model)  # the export's collective
    if rank == 0:
        save_hf(model, sd, a.out, tokenizer=tok, dtype=a.dtype, meta={"source": "rt_fsdp2_worker"})
        sums = {n: [float(t.double().sum()), float(t.double().abs().sum())] for n, t in full.items()}
        with open(a.report, "w") as f:
            json.dump({"params": sums, "world": dist.get_world_size(), "n_state": len(sd), **facts}, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
