#!/usr/bin/env python
"""Build a tiny random-weight Qwen3 and a locally trained tokenizer in OUT_DIR.

Usage: python scripts/make_tiny_model.py OUT_DIR
"""

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from training.tiny_model import main

if __name__ == "__main__":
    raise SystemExit(main())
