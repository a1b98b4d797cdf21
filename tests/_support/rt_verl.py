"""A DataProto as verl's agent loop hands its reward workers, built by hand (verl tests)."""

from __future__ import annotations


def make_batch(tok, rows: list[dict]):
    """A DataProto shaped like the one verl's agent loop hands its reward workers: left-padded
    prompts, right-padded responses, the attention mask over both, and the row's non-tensor fields.
    Each row: prompt (messages), response (text), data_source, ground_truth, extra_info, uid."""
    import numpy as np
    import torch
    from verl import DataProto

    pad = tok.pad_token_id if tok.pad_token_id is not None else 0
    p_ids = [tok(tok.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False),
                 add_special_tokens=False)["input_ids"] for r in rows]
    r_ids = [tok(r["response"], add_special_tokens=False)["input_ids"] + [tok.eos_token_id] for r in rows]
    P, R = max(map(len, p_ids)), max(map(len, r_ids)) + 3  # +3: real padding on every response
    prompts = torch.full((len(rows), P), pad, dtype=torch.long)
    responses = torch.full((len(rows), R), pad, dtype=torch.long)
    mask = torch.zeros((len(rows), P + R), dtype=torch.long)
    for i, (p, r) in enumerate(zip(p_ids, r_ids)):
        prompts[i, P - len(p):] = torch.tensor(p)
        responses[i, :len(r)] = torch.tensor(r)
        mask[i, P - len(p):P] = 1
        mask[i, P:P + len(r)] = 1

    def obj(values):
        a = np.empty(len(values), dtype=object)
        a[:] = values
        return a

    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": mask,
                 "input_ids": torch.cat([prompts, responses], dim=1)},
        non_tensors={"data_source": obj([r["data_source"] for r in rows]),
                     "reward_model": obj([{"ground_truth": r["ground_truth"]} for r in rows]),
                     "extra_info": obj([dict(r.get("extra_info") or {}) for r in rows]),
                     "uid": obj([r.get("uid", f"u{i}") for i, r in enumerate(rows)]),
                     "raw_prompt": obj([r["prompt"] for r in rows])})
