"""What a TRL run logs: wandb offline without a key (said in a log line), completions tables cut
to the first rows and characters with every column still aligned, and, end to end, a stage-1 GSPO
run with ``log_completions`` and ``report_to: wandb`` on a machine with no key."""

from __future__ import annotations

import logging
from collections import defaultdict, deque

import pytest
from rt_paths import REPO_ROOT

from training.trl_logging import bound_logs, wandb_mode_for


def test_wandb_goes_offline_without_a_key(caplog, tmp_path) -> None:
    no_login = str(tmp_path / "no-netrc")
    env: dict[str, str] = {"NETRC": no_login}
    with caplog.at_level(logging.INFO, logger="training.trl_logging"):
        assert wandb_mode_for(["wandb"], env) == "offline"
    assert env["WANDB_MODE"] == "offline" and "WANDB_MODE=offline" in caplog.text
    assert wandb_mode_for("wandb", {"WANDB_API_KEY": "k", "NETRC": no_login}) == "online"
    assert wandb_mode_for(["wandb"], {"WANDB_MODE": "disabled"}) == "disabled"
    (tmp_path / "netrc").write_text("machine api.wandb.ai\n  login user\n  password k\n")
    logged_in = {"NETRC": str(tmp_path / "netrc")}
    assert wandb_mode_for(["wandb"], logged_in) == "online" and "WANDB_MODE" not in logged_in
    none: dict[str, str] = {"NETRC": no_login}
    assert wandb_mode_for("none", none) is None and wandb_mode_for(["tensorboard"], none) is None
    assert "WANDB_MODE" not in none


def trl_logs(n: int) -> dict:
    """GRPOTrainer._logs as TRL 1.16 builds it (deques bounded by the generation batch)."""
    logs = {"images": deque(maxlen=n), "prompt": deque(maxlen=n), "completion": deque(maxlen=n),
            "rewards": defaultdict(lambda: deque(maxlen=n)), "advantages": deque(maxlen=n),
            "extra": defaultdict(lambda: deque(maxlen=n))}
    logs["prompt"].extend([[{"role": "user", "content": f"question {i} " + "x" * 50}] for i in range(n)])
    logs["completion"].extend([[{"role": "assistant", "content": f"answer {i} " + "y" * 500}] for i in range(n)])
    logs["rewards"]["r"].extend(float(i) for i in range(n))
    logs["advantages"].extend(float(-i) for i in range(n))
    logs["extra"]["r/failed_leaves"].extend(f"leaf_{i} " * 100 for i in range(n))
    logs["extra"]["r/tree_score"].extend(i / n for i in range(n))
    return logs


def test_bound_logs_cuts_rows_and_text_and_keeps_columns_aligned() -> None:
    logs = trl_logs(16)
    bound_logs(logs, max_chars=40, max_rows=4)
    for col in (logs["prompt"], logs["completion"], logs["advantages"], logs["rewards"]["r"],
                logs["extra"]["r/failed_leaves"], logs["extra"]["r/tree_score"]):
        assert len(col) == 4
    assert logs["completion"][3][0]["content"].startswith("answer 3 yyy") and "more characters" in \
        logs["completion"][3][0]["content"] and len(logs["completion"][3][0]["content"]) < 80
    assert logs["rewards"]["r"][3] == 3.0 and logs["advantages"][3] == -3.0 and logs["extra"]["r/tree_score"][3] == 3 / 16
    assert len(logs["extra"]["r/failed_leaves"][0]) < 80
    # the next batch refills the deques (maxlen = the generation batch): the old rows leave
    logs["prompt"].extend([[{"role": "user", "content": "new"}]] * 16)
    assert len(logs["prompt"]) == 16 and all(m[0]["content"] == "new" for m in logs["prompt"])


@pytest.mark.slow
def test_stage1_run_logs_small_completions_offline(monkeypatch, tiny_model_dir, tmp_path, caplog) -> None:
    pytest.importorskip("trl")
    pytest.importorskip("wandb")
    import pandas as pd

    from training.trl_launcher import load_config, train

    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("WANDB_MODE", "")  # unset for the launcher; the launcher's offline is undone after the test
    monkeypatch.setenv("NETRC", str(tmp_path / "no-netrc"))  # no `wandb login` either
    monkeypatch.setenv("WANDB_DIR", str(tmp_path / "wandb-dir"))
    (tmp_path / "wandb-dir").mkdir()
    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("RUBRICSTREE_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.chdir(REPO_ROOT)
    cfg = load_config(REPO_ROOT / "configs" / "smoke" / "stage1_mcq.yaml",
                      ["grpo.max_steps=1", "grpo.save_steps=1", "grpo.log_completions=true", "grpo.report_to=[wandb]",
                       "completion_log.max_chars=12", "completion_log.max_rows=4"])
    with caplog.at_level(logging.INFO, logger="training.trl_logging"):
        result = train(cfg)
    assert result.global_step == 1
    assert "logging offline (WANDB_MODE=offline)" in caplog.text
    assert list((tmp_path / "wandb-dir" / "wandb").glob("offline-run-*")), "no offline wandb run folder"
    (table,) = sorted((tmp_path / "run" / "completions").glob("completions_*.parquet"))
    df = pd.read_parquet(table)
    assert len(df) == 4  # of 8 completions in the batch
    texts = [m["content"] for c in df["completion"] for m in c] if not isinstance(df["completion"][0], str) \
        else list(df["completion"])
    assert all(len(t) <= 12 + len(" [… 99999 more characters]") for t in texts)


@pytest.mark.slow
def test_stage3_completions_table_has_the_leaf_columns(monkeypatch, tiny_model_dir, judge_url, tmp_path) -> None:
    """Through TRL's own log_extra and completions table, with the real judge server."""
    pytest.importorskip("trl")
    import pandas as pd

    from training.trl_launcher import load_config, train

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tiny_model_dir))
    monkeypatch.setenv("RUBRICSTREE_RUN_DIR", str(tmp_path / "run"))
    monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", judge_url)
    monkeypatch.chdir(REPO_ROOT)
    cfg = load_config(REPO_ROOT / "configs" / "smoke" / "stage3_clinical_rubric.yaml",
                      ["grpo.max_steps=1", "grpo.save_steps=1", "grpo.log_completions=true",
                       "completion_log.max_rows=4"])
    assert train(cfg).global_step == 1
    (table,) = sorted((tmp_path / "run" / "completions").glob("completions_*.parquet"))
    df = pd.read_parquet(table)
    assert len(df) == 4
    for col in ("clinical_rubric/failed_leaves", "clinical_rubric/uncertain_leaves", "clinical_rubric/verdicts",
                "clinical_rubric/tree_score", "clinical_rubric/unscored"):
        assert col in df.columns, sorted(df.columns)
    assert any(c.startswith("clinical_rubric/macro/") for c in df.columns)
    # every scored row lists its routed leaves' verdicts (leaf=p_yes) and failed leaves, by leaf id (bounded lists)
    from reward.tree import load_tree

    leaves = {leaf.id for leaf in load_tree().leaves}
    scored = df[df["clinical_rubric/unscored"] == ""]
    assert len(scored)
    for verdicts, failed in zip(scored["clinical_rubric/verdicts"], scored["clinical_rubric/failed_leaves"]):
        ids = [v.split("=")[0] for v in verdicts.split() if "=" in v]
        assert ids and set(ids) <= leaves
        assert {x for x in failed.split() if not x.startswith("+") and x != "more"} <= leaves
