"""A real vLLM server of the tiny model started by scripts/serve_judge.sh under the name
``gpt-4.1`` (on a free port, bfloat16, VLLM_SERVER_DEV_MODE=1 so it answers /server_info):

- item 1 (review of issue 24): the served name is not an identity. An evaluation's record of
  this judge (over the token-id and the chat API) names its endpoint and the weights the server
  reports, and the comparability verdict says "not comparable" with both reasons, although the
  name and every grader setting are the reference ones;
- item 3 (review of issue 26): the judge identity carries what the server reports about how it
  runs the model: its dtype (here bfloat16, read from /server_info), the vLLM version and the
  KV-cache dtype;
- item 5 (review of issue 26): ``serve_judge.sh --stop`` (what run_tests.sh, train.sh,
  train_pipeline.sh and eval_checkpoint.sh call) stops the whole process group: after it, no
  process of the server (API process, engine core, workers) survives, the port is closed and the
  pid file is gone.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

import pytest
from rt_net import free_port
from rt_paths import REPO_ROOT

from reward.healthbench.variants import VARIANTS
from reward.judge.official import GRADER_SYSTEM_MESSAGE, OFFICIAL_TEMPLATE_SHA256, reference_grader_record, text_sha256
from training.eval.comparability import comparability
from training.eval.judge_record import grading_fields, served_judge_record

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not Path("/proc").is_dir(), reason="reads /proc")]


def _group(pgid: int) -> list[int]:
    """Live (not zombie) processes of a process group."""
    out = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError, IndexError):
            continue
        if fields[0] != "Z" and int(fields[2]) == pgid:
            out.append(int(d.name))
    return out


@pytest.fixture(scope="module")
def spoof_server(tmp_path_factory):
    model = os.environ.get("RUBRICSTREE_TINY_MODEL")
    if not model or not Path(model, "config.json").is_file():
        pytest.skip("no tiny model: set RUBRICSTREE_TINY_MODEL (make test builds one)")
    tmp = tmp_path_factory.mktemp("spoof")
    pid_file, port = tmp / "judge.pid", free_port()
    env = {**os.environ, "VLLM_SERVER_DEV_MODE": "1", "JUDGE_DTYPE": "bfloat16", "JUDGE_WAIT_S": "450",
           "JUDGE_MAX_LEN": "2048", "VLLM_CPU_KVCACHE_SPACE": "1"}
    cmd = ["bash", str(REPO_ROOT / "scripts/serve_judge.sh"), "--model", model, "--served-name", "gpt-4.1",
           "--port", str(port), "--pid-file", str(pid_file), "--log", str(tmp / "server.log"),
           "--", "--enforce-eager"]  # no compilation: about two minutes shorter a start on CPU
    try:
        res = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=480, check=False)
    except subprocess.TimeoutExpired:  # the script was killed: the server it started is ours to stop
        subprocess.run(["bash", str(REPO_ROOT / "scripts/serve_judge.sh"), "--stop", "--pid-file", str(pid_file)],
                       timeout=90, check=False)
        pytest.fail("the vLLM server did not answer within 480 s")
    if res.returncode != 0:
        log = (tmp / "server.log").read_text()[-3000:] if (tmp / "server.log").exists() else ""
        pytest.fail(f"serve_judge.sh failed: {res.stderr}\n{log}")
    pid = int(pid_file.read_text())
    yield {"pid": pid, "pid_file": pid_file, "port": port, "url": f"http://127.0.0.1:{port}/v1"}
    if _group(pid):  # a failed stop test must not leave the server behind
        os.killpg(pid, signal.SIGKILL)


def _published_metrics(record: dict) -> dict:
    """A run equal to the reference one in everything but who grades: the judge's record."""
    return {
        "grading": {"mode": "explain", "template": "healthbench-official", "template_sha256": OFFICIAL_TEMPLATE_SHA256,
                    "system_message_sha256": text_sha256(GRADER_SYSTEM_MESSAGE),
                    "sampling": reference_grader_record(), **grading_fields(record)},
        "data": {"file": "hard.jsonl", "sha256": VARIANTS["hard"].sha256, "rows_in_file": 1000},
        "n_rows": 1000, "n_unscored": 0, "length_adjusted": None, "system_prompt": {"mode": "none"},
        "responses": {"finish_reasons": {"stop": 1000}},
        "generation": {"temperature": 0.6, "top_p": 0.95, "top_k": 20, "max_new_tokens": 16000},
    }


@pytest.mark.parametrize("api", ["auto", "chat"])
def test_a_local_server_named_gpt41_is_not_the_reference_grader(spoof_server, api):
    url = spoof_server["url"]
    record = served_judge_record(url, api, "gpt-4.1")
    assert record["model"] == "gpt-4.1" and record["backend"] == ("http" if api == "auto" else "chat")
    assert record["endpoints"] == [url] and record["root"]
    v = comparability(_published_metrics(record))
    assert v["comparable_to_published"] is False
    notes = " | ".join(v["comparability_notes"])
    assert f"served at {url}, not by OpenAI" in notes and "reports local weights" in notes
    assert "not gpt-4.1" not in notes  # the name itself is fine: the identity is not
    # the same run graded at OpenAI's endpoint with no local weights is the comparable one
    hosted = {**record, "endpoints": ["https://api.openai.com/v1"], "root": None}
    assert comparability(_published_metrics(hosted))["comparable_to_published"] is True


def test_the_identity_carries_the_dtype_the_server_reports(spoof_server):
    from reward.judge.server_facts import server_facts

    url = spoof_server["url"]
    facts = server_facts(url)
    assert facts["dtype"] == "bfloat16" and facts["vllm"] and "cache_dtype" in facts
    assert "quantization" in facts
    identity = served_judge_record(url, "auto", "gpt-4.1")["identity"]  # the same served_model_id as HTTPJudge's
    assert "dtype=bfloat16" in identity and f"vllm={facts['vllm']}" in identity


def test_stop_ends_the_whole_process_group_and_closes_the_port(spoof_server):
    pid, port = spoof_server["pid"], spoof_server["port"]
    before = _group(pid)
    assert len(before) >= 2, before  # the API process and the engine core it started
    t0 = time.monotonic()
    res = subprocess.run(["bash", str(REPO_ROOT / "scripts/serve_judge.sh"), "--stop", "--pid-file",
                          str(spoof_server["pid_file"]), "--port", str(port)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    assert _group(pid) == [] and not any(Path(f"/proc/{p}").exists() and p in _group(pid) for p in before)
    assert not spoof_server["pid_file"].exists()
    import socket

    with socket.socket() as s:
        assert s.connect_ex(("127.0.0.1", port)) != 0  # nothing listens any more
    assert time.monotonic() - t0 < 600  # a hang bound: SIGTERM, SIGKILL after 15 s, the port closed
