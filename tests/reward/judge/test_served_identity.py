"""A verdict is served only by the judge that made it (issue 39), against a vLLM-shaped stub of
ours (``rt_vllm_stub``) through the real HTTP transport. Each test reproduces one case the red
team found, and shows it refused or graded afresh, with nothing stale served:

- tokenizer swap: a run with another tokenizer than the server's filled the cache, and a later
  correct run was served its verdicts;
- chat weight swap: the chat backend had no content fingerprint of the weights;
- pool replica: a second endpoint serving other weights under the same name graded half a run,
  cached under the first endpoint's identity;
- remote root: weights the server reports at a path not readable here cached with no revision;
- quantization change: fp8 against bf16 at the same path cached with no revision;
- hub-link write: a file copied into a hub snapshot through its link left the identity unchanged.

The same cases against the real vLLM CPU server are in test_served_identity_server.py.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from rt_vllm_stub import HashTokenizer, VLLMStub, model_folder

from reward.errors import InputError
from reward.judge import JudgeConfig, JudgeItem, Message, VerdictCache
from reward.judge.chat import ChatJudge
from reward.judge.http import HTTPJudge

CONV = (Message(role="user", content="I took two ibuprofen with my warfarin. Is that fine?"),)
ITEMS = [JudgeItem(conversation=CONV, response=f"Call your anticoagulation clinic today ({k}).",
                   criterion=f"Warns about bleeding risk ({k}).") for k in range(12)]


def _model(folder: Path, seed: int = 0) -> Path:
    return model_folder(folder, seed)


def _http(url: str, cache=None, tokenizer=None, **kw) -> HTTPJudge:
    return HTTPJudge(url, "judge", tokenizer=tokenizer or HashTokenizer(), cache=cache, max_retries=1,
                     backoff_s=0.001, **kw)


def _chat(url: str, cache=None, **kw) -> ChatJudge:
    return ChatJudge(url, "judge", config=JudgeConfig(mode="choice"), cache=cache, max_retries=1, backoff_s=0.001,
                     **kw)


def _stale(verdicts) -> int:
    return sum(v.cached for v in verdicts)


# ---------------------------------------------------------------- tokenizer swap
def test_another_tokenizer_than_the_servers_is_refused_at_start_up(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=str(_model(tmp_path / "m"))) as srv:
        with pytest.raises(InputError, match="tokenizer") as exc:
            _http(srv.url, cache, tokenizer=HashTokenizer(salt="another vocabulary"))
        assert srv.url in str(exc.value) and exc.value.field == "tokenizer"
        with pytest.raises(InputError, match="does not build the prompt ids"):  # same words, other answer ids
            _http(srv.url, cache, tokenizer=HashTokenizer(yes_id=5, no_id=6))
        assert len(cache) == 0  # the wrong run fills nothing
        right = _http(srv.url, cache)
        out = right.grade_sync(ITEMS)
    assert all(v.ok for v in out) and _stale(out) == 0 and right.tokenizer_status[f"{srv.url}/v1"] == "checked"


def test_a_tokenizer_the_server_cannot_check_is_refused_by_the_probe(tmp_path):
    """Without /tokenize the swap is not caught by the tokenizer check; the probe items then come
    back with the answer ids masked (vLLM's -9999 clamp), so no endpoint confirms who grades and
    the run is refused at start-up (issue 48: the probe fails closed), naming why; before, the
    judge started and every verdict failed."""
    from reward.errors import JudgeUnavailableError

    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=str(_model(tmp_path / "m")), tokenize=False) as srv:
        with pytest.raises(JudgeUnavailableError, match="tokenizer other than the server's") as exc:
            _http(srv.url, cache, tokenizer=HashTokenizer(salt="x", yes_id=5, no_id=6))
        assert srv.url in str(exc.value) and len(cache) == 0
        right = _http(srv.url, cache)
        assert all(v.ok for v in right.grade_sync(ITEMS))


# ---------------------------------------------------------------- chat weight swap
def test_chat_backend_names_the_weights_by_content(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    folder = _model(tmp_path / "judge")
    with VLLMStub(root=str(folder)) as srv:
        first = _chat(srv.url, cache)
        a = first.grade_sync(ITEMS)
        assert all(v.ok for v in a) and len(cache) == len(ITEMS)
        _model(folder, seed=1)  # new weights copied over the same folder; the server now answers as them
        srv.weights = "w2"
        second = _chat(srv.url, cache)
        b = second.grade_sync(ITEMS)
    assert second.model_id != first.model_id and _stale(b) == 0
    assert [v.p_yes for v in b] != [v.p_yes for v in a]


def test_chat_backend_refuses_to_cache_weights_it_cannot_fingerprint(tmp_path):
    with VLLMStub(root="/models/on-another-machine") as srv:
        with pytest.raises(InputError, match="not a model folder readable here"):
            _chat(srv.url, VerdictCache(tmp_path / "v.sqlite"))
        assert _chat(srv.url, VerdictCache(tmp_path / "v.sqlite"), revision="judge-v1").model_id.endswith("!judge-v1")
        assert _chat(srv.url, None).cache is None


# ---------------------------------------------------------------- pool replica
@pytest.mark.parametrize("backend", ["http", "chat"])
@pytest.mark.parametrize("differ", ["root", "weights", "dtype", "not listed"])
def test_a_replica_that_serves_another_judge_is_refused_and_named(tmp_path, backend, differ):
    root = str(_model(tmp_path / "judge"))
    other = {"root": {"root": str(_model(tmp_path / "other", seed=2))},  # other weights at another path
             "weights": {"weights": "w2"},  # other weights behind the same path (another machine)
             "dtype": {"server_info": {"dtype": "float16", "quantization": "None"}},
             "not listed": {"model": "something-else"}}[differ]
    cache = VerdictCache(tmp_path / "v.sqlite")
    make = _http if backend == "http" else _chat
    with VLLMStub(root=root, server_info={"dtype": "bfloat16", "quantization": "None"}) as a, \
            VLLMStub(root=root, server_info={"dtype": "bfloat16", "quantization": "None"}) as same, \
            VLLMStub(**{"root": root, "server_info": {"dtype": "bfloat16", "quantization": "None"}, **other}) as b:
        with pytest.raises(InputError, match="pool does not agree") as exc:
            make(f"{a.url},{same.url},{b.url}", cache)
        assert f"{b.url}/v1 " in str(exc.value) + " " and str(exc.value).index(b.url) < str(exc.value).index(a.url)
        assert len(cache) == 0
        agreed = make(f"{a.url},{same.url}", cache)  # replicas of one judge: both grade
        out = agreed.grade_sync(ITEMS)
        assert all(v.ok for v in out) and len(agreed.stats.by_endpoint) == 2
        alone = make(a.url, cache)
        assert alone.model_id == agreed.model_id and _stale(alone.grade_sync(ITEMS)) == len(ITEMS)


@pytest.mark.parametrize("backend", ["http", "chat"])
def test_a_replica_with_other_weights_is_seen_by_its_answers_alone(tmp_path, backend):
    """A server that does not take the text probe (prompt_logprobs) is still compared by its
    answers to fixed judge items, asked as grading asks."""
    root = str(_model(tmp_path / "judge"))
    make = _http if backend == "http" else _chat
    with VLLMStub(root=root, prompt_logprobs=False) as a, \
            VLLMStub(root=root, prompt_logprobs=False, weights="w2") as b:
        with pytest.raises(InputError, match="fixed judge items") as exc:
            make(f"{a.url},{b.url},{a.url}", None)
        assert f"{b.url}/v1 answers fixed probes differently" in str(exc.value)


def test_a_replica_that_does_not_answer_at_start_up_grades_nothing(tmp_path, caplog):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    with VLLMStub(root=str(_model(tmp_path / "m"))) as srv:
        judge = _http(f"{dead},{srv.url}", VerdictCache(tmp_path / "v.sqlite"))
        assert [ep.url for ep in judge.pool.endpoints] == [f"{srv.url}/v1"]
    assert "left out of the pool" in caplog.text and dead in caplog.text


# ---------------------------------------------------------------- remote root, quantization
def test_weights_not_readable_here_cache_only_under_a_revision_and_a_swap_behind_it_is_seen(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root="/models/remote-judge") as srv:
        with pytest.raises(InputError, match="revision"):
            _http(srv.url, cache)
        first = _http(srv.url, cache, revision="judge-2026-12")
        assert all(v.ok for v in first.grade_sync(ITEMS)) and len(cache) == len(ITEMS)
        srv.weights = "w2"  # swapped on the remote machine; nothing it reports changes
        with pytest.raises(InputError, match="answers fixed probes differently"):
            _http(srv.url, cache, revision="judge-2026-12")
        fresh = _http(srv.url, cache, revision="judge-2027-01")  # named anew: graded anew
        assert _stale(fresh.grade_sync(ITEMS)) == 0


def test_another_dtype_or_quantization_at_the_same_path_is_another_judge(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    root = str(_model(tmp_path / "judge"))
    with VLLMStub(root=root, server_info={"dtype": "bfloat16", "quantization": "None"}) as srv:
        bf16 = _http(srv.url, cache)
        bf16.grade_sync(ITEMS)
        srv.server_info = {"dtype": "bfloat16", "quantization": "fp8"}  # reported (dev mode)
        srv.numerics = 0.2
        fp8 = _http(srv.url, cache)
        assert fp8.model_id != bf16.model_id and _stale(fp8.grade_sync(ITEMS)) == 0
        srv.server_info, srv.numerics = {"dtype": "bfloat16", "quantization": "None"}, 0.0
        assert _stale(_http(srv.url, cache).grade_sync(ITEMS)) == len(ITEMS)  # the bf16 judge again: its own


def test_a_quantization_the_server_does_not_report_is_seen_by_the_probe(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    with VLLMStub(root=str(_model(tmp_path / "judge"))) as srv:  # no /server_info: dtype and quantization unsaid
        _http(srv.url, cache).grade_sync(ITEMS)
        srv.numerics = 0.2  # --quantization fp8 at load: other numbers, nothing reported
        with pytest.raises(InputError, match="answers fixed probes differently"):
            _http(srv.url, cache)
        srv.cache = {"cache_dtype": "auto", "kv_cache_memory_bytes": "2147483648", "kv_cache_size_tokens": "4194304"}
        half = _http(srv.url, cache)  # the KV bytes per token follow the dtype: reported, so another identity
        assert "kv_bytes_per_token=512" in half.model_id and _stale(half.grade_sync(ITEMS)) == 0


# ---------------------------------------------------------------- hub-link write
def _hub_snapshot(tmp_path: Path, commit: str) -> Path:
    repo = tmp_path / "hub" / "models--org--judge"
    snap = repo / "snapshots" / commit
    (repo / "blobs").mkdir(parents=True)
    snap.mkdir(parents=True)
    for name, data in (("config.json", b'{"model_type": "qwen3"}'), ("model.safetensors", b"\1" * 65536)):
        digest = hashlib.sha256(data).hexdigest() if name.endswith(".safetensors") else \
            hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        (repo / "blobs" / digest).write_bytes(data)
        (snap / name).symlink_to(Path("..") / ".." / "blobs" / digest)
    return snap


def test_a_file_copied_into_a_hub_snapshot_through_its_link_is_another_judge(tmp_path):
    cache = VerdictCache(tmp_path / "v.sqlite")
    snap = _hub_snapshot(tmp_path, "c" * 40)
    with VLLMStub(root=str(snap)) as srv:
        first = _http(srv.url, cache)
        assert f"#rev-{'c' * 40}" in first.model_id
        first.grade_sync(ITEMS)
        (snap / "model.safetensors").write_bytes(b"\2" * 65536)  # cp new.safetensors snapshot/ (through the link)
        srv.weights = "w2"
        second = _http(srv.url, cache)
        b = second.grade_sync(ITEMS)
    assert (snap / "model.safetensors").is_symlink()
    assert second.model_id != first.model_id and "rev-" not in second.model_id and _stale(b) == 0
