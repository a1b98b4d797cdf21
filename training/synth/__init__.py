"""Synthetic stage-3 data (Vaidya-Rubrics style) and the rubric-generation evaluation.

The data-pipeline layer: it may import ``reward`` and ``training.generation``. Jobs, one per
module: ``store`` (durable call cache, append-only outputs and failures), ``llm`` (text/JSON
requests through the generation layer), ``critics`` (the bounded actor-critic loop and the
critics' prompts), ``conversations`` (themed, persona-driven conversations), ``rubrics`` (per-axis
rubric items, aggregation, seeded inversion), ``datasheet`` (counts and rates), ``matchers`` and
``eval_rubrics`` (score generated rubric items against reference items).
"""
