"""Evaluation of checkpoints: HealthBench(-Hard) with a rubric judge, and multiple-choice QA.

Modules, in data-flow order:

- ``data``: find the HealthBench file (local path, URL or variant name), verify its SHA-256.
- ``generate``: produce responses with the checkpoint (vLLM/OpenAI server or in-process).
- ``store``: append-and-flush JSONL records, so a killed run resumes where it stopped.
- ``healthbench``: generate -> grade every rubric item -> score, resumable.
- ``mcq_formats`` / ``mcq``: MedQA, MedBullets and MedXpertQA rows, and their evaluation.
- ``report``: metrics.json -> report.md, report.html and plots.
- ``compare``: several run folders side by side, with a paired bootstrap of differences.
- ``tracking``: optional Weights & Biases logging.

Nothing here is imported by ``reward/``; heavy packages (torch, transformers, matplotlib) are
imported inside the functions that need them.
"""
