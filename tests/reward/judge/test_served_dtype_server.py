"""Another dtype behind the same path and name is another judge (issue 39, "quantization change"),
against two real vLLM CPU servers of the same tiny model: the suite's (float32) and one this module
starts at bfloat16 (scripts/serve_judge.sh, a free port in 8800-8899, stopped at the end).

vLLM reports neither the dtype nor a load-time quantization without its development mode; the
identity still tells these two apart by what the server does report (the KV cache's bytes per
token follow the model's dtype: 1024 against 512). A run against one is never served the other's
verdicts, and a pool of the two is refused, naming the odd one.
"""

from __future__ import annotations

import os
import socket
import subprocess
import uuid

import pytest
from rt_paths import REPO_ROOT, judge_venv_python

from reward.errors import InputError
from reward.judge import JudgeItem, Message, VerdictCache, make_judge
from reward.serving import normalise_url

pytestmark = [pytest.mark.server, pytest.mark.slow]


def _vllm_python() -> str | None:
    return judge_venv_python()


def _free_port() -> int:
    for port in range(8800, 8900):
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    pytest.skip("no free port in 8800-8899")


@pytest.fixture(scope="module")
def bf16_url(tmp_path_factory):
    if not os.environ.get("RUBRICSTREE_JUDGE_URL") or not os.environ.get("RUBRICSTREE_TINY_MODEL"):
        pytest.skip("no judge server: set RUBRICSTREE_JUDGE_URL (make test starts one)")
    py = _vllm_python()
    if py is None:
        pytest.skip("no vLLM interpreter (.venv-judge) to start a second server")
    state = tmp_path_factory.mktemp("bf16-server")
    port = _free_port()
    pid = state / "judge.pid"
    env = {**os.environ, "VLLM_PYTHON": py, "JUDGE_DTYPE": "bfloat16", "JUDGE_WAIT_S": "600"}
    proc = subprocess.run([str(REPO_ROOT / "scripts/serve_judge.sh"), "--model", os.environ["RUBRICSTREE_TINY_MODEL"],
                           "--served-name", "tiny", "--port", str(port), "--pid-file", str(pid), "--log",
                           str(state / "server.log")], env=env, capture_output=True, text=True, timeout=900,
                          check=False)
    try:
        if proc.returncode != 0:
            pytest.fail(f"the bfloat16 server did not start: {proc.stderr[-2000:]}")
        yield proc.stdout.strip()
    finally:
        subprocess.run([str(REPO_ROOT / "scripts/serve_judge.sh"), "--stop", "--pid-file", str(pid), "--port",
                        str(port)], env=env, capture_output=True, timeout=120, check=False)


def _items() -> list[JudgeItem]:
    conv = (Message(role="user", content=f"[{uuid.uuid4().hex}] My baby is 6 weeks old and has a fever of 38.3."),)
    return [JudgeItem(conversation=conv, response="Take her to the emergency department now.",
                      criterion=f"Advises urgent assessment ({k}).") for k in range(6)]


def _judge(url: str, cache):
    return make_judge(judge_url=url, judge_api="completions", cache=cache, max_retries=1, backoff_s=0.01)


def test_a_run_against_the_other_dtype_is_never_served_the_first_ones_verdicts(judge_url, bf16_url, tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    items = _items()
    f32 = _judge(judge_url, cache)
    a = f32.grade_sync(items)
    bf16 = _judge(bf16_url, cache)
    b = bf16.grade_sync(items)
    assert "kv_bytes_per_token=1024" in f32.model_id and "kv_bytes_per_token=512" in bf16.model_id
    assert all(v.ok for v in a + b) and not any(v.cached for v in b)  # graded afresh, not served f32's
    assert all(v.cached for v in _judge(judge_url, cache).grade_sync(items))  # each keeps its own


def test_a_pool_of_the_two_dtypes_is_refused_naming_the_odd_one(judge_url, bf16_url, tmp_path):
    with pytest.raises(InputError, match="pool does not agree") as exc:
        _judge(f"{judge_url},{judge_url},{bf16_url}", VerdictCache(tmp_path / "v.sqlite"))
    message = str(exc.value)
    assert f"{normalise_url(bf16_url)} serves 'tiny' with" in message and "kv_bytes_per_token=512" in message
