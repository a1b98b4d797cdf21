"""Build a tiny random-weight Qwen3 and a locally trained tokenizer.

No model can be downloaded on our CI machines, so tests, the demo and CI build this model in
about 15 s. It has the real Qwen3 architecture and a ChatML chat template, so every code path
that takes a real model name (vLLM serving, the in-process judge, TRL) runs unchanged on it.
"""

from __future__ import annotations

import json
import sys
import sysconfig
from pathlib import Path

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
# Words the judge answers with must be single tokens, as they are in real Qwen tokenisers.
MUST_BE_SINGLE = ["yes", "no", " yes", " no", "Yes", "No", " Yes", " No"]
CHATML = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_MEDICAL_TEXT = """
The patient reports chest pain radiating to the left arm with shortness of breath and sweating.
Call emergency services now. Blood pressure 150/95 mmHg, heart rate 110 beats per minute.
HbA1c 7.2 percent suggests diabetes; fasting glucose 130 mg/dL. Sleep duration 5 hours per night.
Take paracetamol 500 mg every 6 hours, no more than 4 g per day. Ask your doctor or pharmacist.
Does the response meet the criterion? Answer yes or no. Yes. No. yes no yes no Yes No.
Answer Yes or No. Say Yes, say No, then yes or no. Is it met? Yes No Yes No.
"""


def _corpus(max_files: int = 400) -> list[str]:
    """Local text to train the tokenizer on: Python's own stdlib sources plus medical prose."""
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    texts = []
    for i, path in enumerate(sorted(stdlib.glob("*.py"))):
        if i >= max_files:
            break
        try:
            texts.append(path.read_text(encoding="utf-8", errors="ignore"))
        except OSError:
            continue
    texts.extend([_MEDICAL_TEXT] * 200)
    # Each answer word, with and without a leading space, often enough that BPE merges it.
    texts.extend([" ".join(MUST_BE_SINGLE) + "\n" + "\n".join(w.strip() for w in MUST_BE_SINGLE)] * 2000)
    return texts


def build_tokenizer(vocab_size: int = 3072):
    """A byte-level BPE tokenizer with ChatML specials, wrapped as a transformers tokenizer."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(_corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token=None, eos_token="<|im_end|>",
                                   pad_token="<|endoftext|>", unk_token=None)
    fast.chat_template = CHATML
    missing = [w for w in MUST_BE_SINGLE if len(fast.encode(w, add_special_tokens=False)) != 1]
    if missing:
        fast.add_tokens([w for w in missing])
        missing = [w for w in MUST_BE_SINGLE if len(fast.encode(w, add_special_tokens=False)) != 1]
        if missing:
            raise RuntimeError(f"answer words are not single tokens: {missing}")
    return fast


def build_tiny_qwen3(out_dir: str | Path, *, hidden_size: int = 128, layers: int = 2,
                     seed: int = 0, vocab_size: int = 3072) -> Path:
    """Write a random-weight Qwen3ForCausalLM and its tokenizer to ``out_dir``; return the path."""
    import torch
    from transformers import Qwen3Config, Qwen3ForCausalLM

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer = build_tokenizer(vocab_size)
    torch.manual_seed(seed)
    config = Qwen3Config(
        vocab_size=len(tokenizer), hidden_size=hidden_size, intermediate_size=hidden_size * 2,
        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
        head_dim=32,  # vLLM's CPU attention supports head sizes >= 32
        max_position_embeddings=8192, tie_word_embeddings=False,
        bos_token_id=None, eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    model = Qwen3ForCausalLM(config)
    # A wider input embedding makes hidden states, and so verdicts, differ visibly between
    # prompts; the output head keeps its small init (untied), so sampling stays diverse enough
    # for GRPO groups to differ.
    with torch.no_grad():
        model.model.embed_tokens.weight.normal_(0.0, 0.5)
    model.save_pretrained(out, safe_serialization=True)
    tokenizer.save_pretrained(out)
    gen = {"eos_token_id": tokenizer.eos_token_id, "pad_token_id": tokenizer.pad_token_id,
           "do_sample": True, "temperature": 1.0}
    (out / "generation_config.json").write_text(json.dumps(gen))
    return out


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: make_tiny_model.py OUT_DIR", file=sys.stderr)
        return 2
    path = build_tiny_qwen3(argv[0])
    print(path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
