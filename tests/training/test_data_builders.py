"""Training data builders: MedQA rows -> conversational MCQ prompts, HealthBench rows -> prompts
with rubrics, the system prompt switch, and the launcher's config loading (env expansion, --set)."""

from __future__ import annotations

import pytest
from rt_paths import REPO_ROOT, TESTS_DIR

pytest.importorskip("datasets")

from reward.errors import InputError
from reward.integrations.trl import MCQRuleReward
from training.data import ANSWER_INSTRUCTION, build_dataset, build_healthbench_dataset, build_mcq_dataset, mcq_user_text
from training.system_prompt import SYSTEM_PROMPT

FIXTURES = TESTS_DIR / "fixtures"
REPO = REPO_ROOT


def test_medqa_rows_become_conversational_prompts(shared_data):
    ds = build_mcq_dataset(shared_data / "medqa_usmle_4opt_test.jsonl", limit=5)
    assert len(ds) == 5
    assert {"prompt", "answer", "options", "answer_text", "judge_prompt", "row_id"} <= set(ds.column_names)
    row = ds[0]
    [turn] = row["prompt"]
    assert turn["role"] == "user"
    text = turn["content"]
    for letter in "ABCD":
        assert f"\n{letter}. {row['options'][letter]}" in text
    assert text.endswith(ANSWER_INSTRUCTION)
    assert row["answer"] in "ABCD" and row["options"][row["answer"]] == row["answer_text"]
    assert row["options"]["E"] is None  # 4-option rows are padded to one schema
    assert row["row_id"] == "mcq-1"


def test_mcq_rule_reward_reads_the_built_columns(shared_data):
    ds = build_mcq_dataset(shared_data / "medqa_usmle_4opt_test.jsonl", limit=3)
    f = MCQRuleReward()
    keys = ds["answer"]
    comps = [[{"role": "assistant", "content": f"Reasoning...\nAnswer: {k}"}] for k in keys]
    assert f(ds["prompt"], comps, answer=keys, options=ds["options"]) == [1.0, 1.0, 1.0]


def test_mixed_option_counts_share_one_dataset(shared_data):
    ds = build_dataset("mcq", [FIXTURES / "mcq_own.jsonl", shared_data / "medqa_usmle_4opt_test.jsonl"], limit=6)
    assert len(ds) == 6
    five = [r for r in ds if r["options"]["E"] is not None]
    assert five, "the fixture has a five-option row"


def test_system_prompt_switch_mcq():
    off = build_mcq_dataset(FIXTURES / "mcq_own.jsonl")
    on = build_mcq_dataset(FIXTURES / "mcq_own.jsonl", system_prompt="ours")
    assert off[0]["prompt"][0]["role"] == "user"
    assert on[0]["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}
    assert on[0]["prompt"][1] == off[0]["prompt"][0]
    assert on[0]["judge_prompt"] == off[0]["prompt"]  # the judge never sees our system prompt


def test_healthbench_rows_keep_rubrics_and_ids():
    ds = build_healthbench_dataset(FIXTURES / "healthbench_own.jsonl")
    assert len(ds) == 5 and ds[0]["prompt_id"] == "own-001"
    assert ds[0]["prompt"][0] == {"role": "system", "content": SYSTEM_PROMPT}  # stage 3 default: ours
    assert ds[0]["judge_prompt"][0]["role"] == "user"
    r0 = ds[0]["rubrics"][0]
    assert r0["points"] == 8.0 and "axis:accuracy" in r0["tags"] and r0["criterion"].startswith("Tells the user")
    off = build_healthbench_dataset(FIXTURES / "healthbench_own.jsonl", system_prompt="none")
    assert off[0]["prompt"] == off[0]["judge_prompt"]


def test_system_prompt_from_a_file_and_merge_with_the_rows_own(tmp_path):
    f = tmp_path / "sp.txt"
    f.write_text("Be brief.\n")
    rows = [{"prompt_id": "x", "prompt": [{"role": "system", "content": "You help a ward nurse."},
                                          {"role": "user", "content": "Dose?"}],
             "rubrics": [{"criterion": "Asks weight.", "points": 3}]}]
    ds = build_healthbench_dataset(rows, system_prompt=str(f))
    assert ds[0]["prompt"][0]["content"] == "Be brief.\n\nYou help a ward nurse."
    with pytest.raises(FileNotFoundError):
        build_healthbench_dataset(rows, system_prompt=str(tmp_path / "missing.txt"))


def test_invalid_rows_name_the_record():
    with pytest.raises(Exception, match="answer_idx|options"):
        build_mcq_dataset([{"question": "q", "options": {"A": "x", "B": "y"}, "answer_idx": "F"}])
    with pytest.raises(InputError, match="#0"):
        build_healthbench_dataset([{"prompt_id": "x", "prompt": [], "rubrics": []}])
    with pytest.raises(ValueError):
        build_dataset("essay", [FIXTURES / "mcq_own.jsonl"])


def test_mcq_user_text_sorted_letters():
    from reward.stages.mcq import MCQRow

    row = MCQRow(question=" Q? ", options={"B": "b", "A": "a"}, answer_idx="A")
    assert mcq_user_text(row, "Pick.") == "Q?\n\nA. a\nB. b\n\nPick."


# ------------------------------------------------------------------ launcher config loading
def test_config_env_expansion_and_overrides(monkeypatch):
    from training.trl_launcher import load_config

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", "/some/tiny")
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("RUBRICSTREE_JUDGE_MODEL", raising=False)
    cfg = load_config(REPO / "configs/smoke/stage2_error_rubric.yaml",
                      ["reward.alpha=0.7", "grpo.max_steps=5", "data.limit=2"])
    assert cfg.model == "/some/tiny" and cfg.judge.url == "http://127.0.0.1:9" and cfg.judge.model is None
    assert cfg.reward.alpha == 0.7 and cfg.grpo["max_steps"] == 5 and cfg.data.limit == 2
    assert cfg.grpo["importance_sampling_level"] == "sequence"


def test_config_errors_name_the_field(monkeypatch, tmp_path):
    from training.trl_launcher import load_config

    monkeypatch.delenv("RUBRICSTREE_TINY_MODEL", raising=False)
    with pytest.raises(InputError, match="RUBRICSTREE_TINY_MODEL"):
        load_config(REPO / "configs/smoke/stage1_mcq.yaml")
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", "/x")
    with pytest.raises(InputError, match="alpha"):
        load_config(REPO / "configs/smoke/stage2_error_rubric.yaml", ["judge.url=http://x", "reward.alpha=-1"])
    with pytest.raises(InputError, match="key=value"):
        load_config(REPO / "configs/smoke/stage1_mcq.yaml", ["grpo.max_steps"])
    with pytest.raises(InputError, match="needs a judge"):
        load_config(REPO / "configs/smoke/stage3_clinical_rubric.yaml", ["judge.url=", "judge.model="])


@pytest.mark.parametrize("name", ["stage1_mcq", "stage2_error_rubric", "stage3_clinical_rubric"])
def test_paper_configs_validate_with_the_paper_settings(name, monkeypatch):
    from training.trl_launcher import load_config

    for var in ("RUBRICSTREE_JUDGE_URL", "RUBRICSTREE_RUN_ROOT", "FV_DATA"):
        monkeypatch.delenv(var, raising=False)
    cfg = load_config(REPO / f"configs/trl/{name}.yaml")
    g = cfg.grpo
    assert cfg.model.startswith("Qwen/Qwen3-") and g["bf16"] and g["use_vllm"] and g["vllm_mode"] == "colocate"
    assert (g["importance_sampling_level"], g["loss_type"], g["learning_rate"], g["warmup_steps"]) == \
        ("sequence", "grpo", 1e-6, 5)
    assert (g["adam_beta1"], g["adam_beta2"], g["lr_scheduler_type"], g["num_generations"]) == (0.9, 0.95, "cosine", 8)
    assert g["report_to"] == "wandb"
    # 32 prompts per optimizer step on 8 GPUs
    assert g["per_device_train_batch_size"] * g["gradient_accumulation_steps"] * 8 // g["num_generations"] == 32
    assert g["max_completion_length"] == (16000 if name.startswith("stage3") else 10000)
    if name.startswith("stage3"):
        assert g["vllm_max_model_length"] == 20000 and cfg.difficulty.per_epoch and cfg.difficulty.keep == (0.15, 0.7)
        assert cfg.data.system_prompt == "ours"
