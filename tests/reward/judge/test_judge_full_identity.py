"""The judge's identity cannot be fooled by a same-path swap (issue 26, N1 and N3).

N1: the fingerprint used to read the safetensors header plus 16 samples of 64 KiB of each weight
file, so one tensor changed between the samples kept it, and a rerun took every verdict from the
old judge's cache. It is now a full SHA-256 of every model file, remembered per file while its
device, inode, size, mtime and ctime are unchanged, or the commit of an untouched hub snapshot.
N3: a served judge whose ``/v1/models`` gave no entry used to be named by its served name alone,
so two judges served as ``judge`` shared verdicts; now it may cache only under a named revision.
"""

from __future__ import annotations

import http.server
import json
import os
import threading
from pathlib import Path

import numpy as np
import pytest
from rt_fakes import _WordTokenizer
from rt_net import free_port

from reward.judge import identity
from reward.judge.cache import VerdictCache
from reward.judge.identity import MEMO_FILE, model_fingerprint


def _model(folder: Path) -> Path:
    """A model folder: config, tokenizer and a 16 MiB safetensors weight file."""
    from safetensors.numpy import save_file

    folder.mkdir(parents=True)
    (folder / "config.json").write_text('{"model_type": "qwen3"}', encoding="utf-8")
    (folder / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}', encoding="utf-8")
    rng = np.random.default_rng(0)
    save_file({"w": rng.standard_normal(4 << 20).astype(np.float32)}, str(folder / "model.safetensors"))
    return folder


def _flip_byte(f: Path, offset: int, *, keep_mtime: bool = False) -> None:
    st = f.stat()
    with f.open("r+b") as fh:
        fh.seek(offset)
        b = fh.read(1)
        fh.seek(offset)
        fh.write(bytes([b[0] ^ 0xFF]))
    if keep_mtime:
        os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns))


def _forget_process_memo() -> None:
    identity._memo_local.clear()


def test_one_tensor_changed_between_the_old_samples_changes_the_fingerprint(tmp_path):
    judge = _model(tmp_path / "judge")
    before = model_fingerprint(judge)
    # 16 samples of 64 KiB spread over 16 MiB start about every 1.07 MiB; 512 KiB is in no sample
    _flip_byte(judge / "model.safetensors", 512 << 10)
    assert model_fingerprint(judge) != before


def test_a_rewrite_that_restores_the_mtime_is_still_seen(tmp_path):
    judge = _model(tmp_path / "judge")
    before = model_fingerprint(judge)
    _flip_byte(judge / "model.safetensors", 9 << 20, keep_mtime=True)  # same size, same mtime, same inode
    assert model_fingerprint(judge) != before


def test_a_copy_has_the_same_fingerprint_and_the_digest_memo_spares_rereading(tmp_path, monkeypatch):
    judge = _model(tmp_path / "judge")
    fp = model_fingerprint(judge)
    memo = Path(os.environ["RUBRICSTREE_CACHE_DIR"]) / MEMO_FILE
    assert memo.exists()
    import shutil

    shutil.copytree(judge, tmp_path / "copy")
    assert model_fingerprint(tmp_path / "copy") == fp  # content, not place
    reads = []
    real = identity.file_sha256
    monkeypatch.setattr(identity, "file_sha256", lambda f, progress=None: reads.append(f.name) or real(f, progress))
    _forget_process_memo()  # a new process: only the memo file remains
    assert model_fingerprint(judge) == fp and reads == []
    os.utime(judge / "config.json")  # touched: that file (only) is read again
    _forget_process_memo()
    assert model_fingerprint(judge) == fp and reads == ["config.json"]


def test_trainer_state_does_not_change_the_judge(tmp_path):
    judge = _model(tmp_path / "judge")
    fp = model_fingerprint(judge)
    (judge / "optimizer.pt").write_bytes(b"\0" * 1024)
    assert model_fingerprint(judge) == fp


def _snapshot(tmp_path: Path, commit: str) -> Path:
    repo = tmp_path / "hub" / "models--org--judge"
    (repo / "blobs").mkdir(parents=True)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    snap = repo / "snapshots" / commit
    snap.mkdir(parents=True)
    import hashlib

    for name, data in (("config.json", b"{}"), ("model.safetensors", b"\1" * 4096)):
        # as the hub names blobs: a weights (LFS) file by its SHA-256, a small file by its git blob SHA-1
        digest = hashlib.sha256(data).hexdigest() if name.endswith(".safetensors") else \
            hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()
        blob = repo / "blobs" / digest
        blob.write_bytes(data)
        (snap / name).symlink_to(Path("..") / ".." / "blobs" / blob.name)
    return snap


def test_hub_snapshot_is_named_by_its_commit_until_a_file_is_written_over_it(tmp_path, monkeypatch):
    commit = "a" * 40
    snap = _snapshot(tmp_path, commit)
    assert model_fingerprint(snap) == f"rev-{commit}"
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    assert model_fingerprint("org/judge") == f"rev-{commit}"  # the hub id, through the local hub cache
    (snap / "model.safetensors").unlink()
    (snap / "model.safetensors").write_bytes(b"\2" * 4096)  # saved over the link: no longer the hub's
    fp = model_fingerprint(snap)
    assert fp and not fp.startswith("rev-")


@pytest.mark.parametrize("name", ["model.safetensors", "config.json"])
def test_a_file_copied_into_a_hub_snapshot_through_its_link_changes_the_identity(tmp_path, name):
    """Issue 39 (hub-link write): ``cp new.safetensors snapshots/<commit>/model.safetensors``
    follows the link and rewrites the blob; every file stayed a link into ``blobs``, so the
    snapshot kept its ``rev-<commit>`` name and the old judge's verdicts were served. A blob's
    content must now match the name the hub gave it (its SHA-256, or git SHA-1 for small files)."""
    commit = "b" * 40
    snap = _snapshot(tmp_path, commit)
    assert model_fingerprint(snap) == f"rev-{commit}"
    with open(snap / name, "r+b") as fh:  # written through the link, as cp does
        fh.write(b"\3")
    assert (snap / name).is_symlink()
    fp = model_fingerprint(snap)
    assert fp and not fp.startswith("rev-")


@pytest.mark.parametrize("root", ["/dev/zero", "/", "/proc/self"])
def test_a_root_that_is_no_model_folder_is_not_read(root):
    """Issue 39: a server reporting its root as /dev/zero hung start-up (hashing never ended).
    Only a model folder or weights file is hashed; anything else has no fingerprint."""
    assert model_fingerprint(root) is None


# ---------------------------------------------------------------- N3: served identity


@pytest.fixture
def rootless_server():
    """A server whose /v1/models lists ``judge`` without vLLM's ``root``."""
    class H(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            body = json.dumps({"data": [{"id": "judge"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()


def test_served_judge_without_identity_grades_without_the_cache_unless_a_revision_is_named(tmp_path, rootless_server,
                                                                                         caplog):
    """A server that does not say what it serves (no answer at start-up, or no root) grades
    without the verdict cache, saying so once (issue 48: it used to refuse the run); a revision
    the user vouches for names it, and two revisions never share verdicts."""
    from reward.judge.http import HTTPJudge

    cache = VerdictCache(tmp_path / "v.sqlite")
    dead = f"http://127.0.0.1:{free_port()}/v1"
    for url in (dead, rootless_server):
        caplog.clear()
        with caplog.at_level("WARNING"):
            plain = HTTPJudge(url, "judge", tokenizer=_WordTokenizer(), cache=cache)
        assert plain.cache is None
        said = [r.getMessage() for r in caplog.records if "WITHOUT the verdict cache" in r.getMessage()]
        assert len(said) == 1 and "--judge-revision" in said[0], caplog.text
        a = HTTPJudge(url, "judge", tokenizer=_WordTokenizer(), cache=cache, revision="judge-v1")
        b = HTTPJudge(url, "judge", tokenizer=_WordTokenizer(), cache=cache, revision="judge-v2")
        assert a.cache is cache and b.cache is cache
        assert a.model_id != b.model_id  # two named judges never share verdicts
        assert HTTPJudge(url, "judge", tokenizer=_WordTokenizer(), cache=None).cache is None


def test_revision_from_the_environment_reaches_every_command(tmp_path, monkeypatch):
    from reward.judge import make_judge

    dead = f"http://127.0.0.1:{free_port()}/v1"
    unnamed = make_judge(judge_url=dead, served_model="judge", tokenizer=_WordTokenizer(), judge_api="completions",
                         cache=VerdictCache(tmp_path / "v.sqlite"))
    assert unnamed.cache is None
    monkeypatch.setenv("RUBRICSTREE_JUDGE_REVISION", "judge-2026-12")
    judge = make_judge(judge_url=dead, served_model="judge", tokenizer=_WordTokenizer(), judge_api="completions",
                       cache=VerdictCache(tmp_path / "v.sqlite"))
    assert "!judge-2026-12" in judge.model_id and judge.cache is not None


def test_served_judge_is_named_by_the_full_hash_of_its_weights(judge_url, tmp_path):
    from reward.judge import make_judge
    from reward.serving import list_models

    judge = make_judge(judge_url=judge_url, judge_api="completions", cache=VerdictCache(tmp_path / "v.sqlite"))
    root = next(m["root"] for m in list_models(judge_url) if m["id"] == judge.model)
    if not Path(root).exists():
        pytest.skip("the served weights are not readable here")
    assert f"#{model_fingerprint(root)}" in judge.model_id


def test_chat_judge_of_a_server_that_does_not_say_what_it_serves_grades_without_the_cache(tmp_path, rootless_server):
    """The chat backend (issue 48, part 4): a local server that lists the model without a root
    (llama.cpp, Ollama), lists another, or does not answer, grades without the verdict cache unless
    the user names a revision; before, a listed name was cached, and a model swapped behind it
    was served the old one's verdicts."""
    from reward.judge.chat import ChatJudge

    cache = VerdictCache(tmp_path / "v.sqlite")
    for url, model in ((rootless_server, "judge"), (rootless_server, "another-grader"),
                       (f"http://127.0.0.1:{free_port()}/v1", "judge")):
        assert ChatJudge(url, model, cache=cache).cache is None
        named = ChatJudge(url, model, cache=cache, revision="r1")
        assert named.cache is cache and named.model_id.endswith("!r1")


def test_a_providers_dated_snapshot_at_a_hosted_api_is_its_own_name():
    from reward.judge.identity import pinned_hosted_snapshot

    assert pinned_hosted_snapshot("gpt-4.1-2025-04-14", ["https://api.openai.com/v1"])
    assert not pinned_hosted_snapshot("gpt-4.1", ["https://api.openai.com/v1"])
    assert not pinned_hosted_snapshot("gpt-4.1-2025-04-14", ["http://127.0.0.1:8000/v1"])
    assert not pinned_hosted_snapshot("qwen-2025-01-01", ["http://gpu-box:8000/v1", "https://api.example.com"])


