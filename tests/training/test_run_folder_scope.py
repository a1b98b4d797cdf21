"""A training run's id (the scope of its applicability answers): written on the first start, the
same on a resume and on every rank, another in another folder."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from rt_paths import REPO_ROOT

from training.run_folder import RUN_ID, run_scope


def test_a_resume_keeps_the_run_id_and_another_folder_gets_its_own(tmp_path):
    first = run_scope(tmp_path / "run")
    assert first.startswith("run-") and (tmp_path / "run" / RUN_ID).is_file()
    assert run_scope(tmp_path / "run") == first  # the resume
    assert run_scope(tmp_path / "other") != first
    with ThreadPoolExecutor(8) as pool:  # ranks starting together agree
        assert set(pool.map(lambda _: run_scope(tmp_path / "ranks"), range(8))) == {run_scope(tmp_path / "ranks")}


def test_the_trl_reward_is_scoped_to_the_run(tmp_path, monkeypatch):
    from training.trl_config import load_config
    from training.trl_launcher import build_reward_funcs

    monkeypatch.setenv("RUBRICSTREE_TINY_MODEL", str(tmp_path / "m"))
    monkeypatch.setenv("RUBRICSTREE_RUN_DIR", str(tmp_path / "out"))
    cfg = load_config(REPO_ROOT / "configs" / "smoke" / "stage3_clinical_rubric.yaml", ["judge.url=http://127.0.0.1:9/v1"])
    fn = build_reward_funcs(cfg)[0]
    assert fn.applicability_scope == run_scope(tmp_path / "out")
