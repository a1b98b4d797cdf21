"""HealthBench data resolution (local, URL, variant names, SHA-256 checks) and the resumable
JSONL store, crash hook and settings check."""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest
from rt_paths import TESTS_DIR

from reward.errors import InputError
from reward.healthbench import variants
from reward.jsonl import JsonlLog
from training.eval.data import resolve_healthbench
from training.eval.store import CrashHook, check_settings

FIXTURES = TESTS_DIR / "fixtures"
OWN = FIXTURES / "eval_hb_own.jsonl"


@pytest.fixture
def http_dir(tmp_path):
    """A local HTTP server over a folder (no network needed)."""
    root = tmp_path / "www"
    root.mkdir()
    handler = partial(SimpleHTTPRequestHandler, directory=str(root))
    handler.log_message = lambda *a, **k: None
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield root, f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_local_file_without_a_known_name_is_accepted_with_unknown_variant():
    d = resolve_healthbench(str(OWN))
    assert d.path == OWN and d.variant is None and d.length_adjust_variant == "hard"
    assert d.sha256 == hashlib.sha256(OWN.read_bytes()).hexdigest()


def test_a_file_named_like_a_published_variant_must_have_its_hash(tmp_path):
    fake = tmp_path / variants.VARIANTS["hard"].file_name
    shutil.copy(OWN, fake)
    with pytest.raises(InputError, match=r"hard_2025-05-08-21-00-10\.jsonl.*SHA-256.*HealthBench hard"):
        resolve_healthbench(str(fake))


def test_variant_is_recognised_by_hash(tmp_path, monkeypatch):
    digest = hashlib.sha256(OWN.read_bytes()).hexdigest()
    v = variants.VARIANTS["consensus"]
    monkeypatch.setitem(variants.VARIANTS, "consensus", variants.Variant(v.name, v.file_name, v.rows, digest))
    d = resolve_healthbench(str(OWN))
    assert (d.variant, d.variant_source, d.length_adjust_variant) == ("consensus", "sha256", "consensus")


def test_professional_format_and_name_hints(tmp_path):
    pro = tmp_path / "pro.jsonl"
    pro.write_text(json.dumps({"id": 1, "conversation": {"messages": [{"role": "user", "content": "hi"}]},
                               "rubric_items": [{"criterion_text": "greets", "points": 2}]}) + "\n")
    assert resolve_healthbench(str(pro)).variant == "professional"
    sub = tmp_path / "my_hard_subset.jsonl"
    shutil.copy(OWN, sub)
    d = resolve_healthbench(str(sub))
    assert (d.variant, d.variant_source) == ("hard", "file name")


def test_missing_file_is_an_input_error(tmp_path):
    with pytest.raises(InputError, match="not found"):
        resolve_healthbench(str(tmp_path / "nope.jsonl"))


def test_url_is_downloaded_once_into_the_cache(http_dir, tmp_path):
    root, base = http_dir
    shutil.copy(OWN, root / "rows.jsonl")
    d = resolve_healthbench(f"{base}/rows.jsonl", cache_dir=tmp_path / "cache")
    assert d.path.parent.parent == tmp_path / "cache" / "healthbench" and d.path.name == "rows.jsonl" and d.path.read_bytes() == OWN.read_bytes()
    (root / "rows.jsonl").unlink()  # a second resolve uses the cached copy
    assert resolve_healthbench(f"{base}/rows.jsonl", cache_dir=tmp_path / "cache").path == d.path


def test_variant_name_downloads_the_official_file_and_checks_its_hash(http_dir, tmp_path, monkeypatch):
    root, base = http_dir
    monkeypatch.setattr(variants, "BASE_URL", base + "/")
    shutil.copy(OWN, root / variants.VARIANTS["hard"].file_name)  # not the published bytes
    with pytest.raises(InputError, match="SHA-256 is not the published one of HealthBench hard"):
        resolve_healthbench("hard", cache_dir=tmp_path / "cache")
    assert not list((tmp_path / "cache" / "healthbench").iterdir())  # nothing half-verified is kept


def test_missing_url_is_an_input_error(http_dir, tmp_path):
    _, base = http_dir
    with pytest.raises(InputError, match="HTTP 404"):
        resolve_healthbench(f"{base}/absent.jsonl", cache_dir=tmp_path / "cache")


def test_jsonl_log_repairs_a_torn_tail_and_rejects_a_bad_middle_line(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"a": 1}\n{"a": 2}\n{"a": ')
    log = JsonlLog(path)
    assert log.load() == [{"a": 1}, {"a": 2}]
    assert path.read_text() == '{"a": 1}\n{"a": 2}\n'
    log.append({"a": 3})
    log.close()
    assert JsonlLog(path).load()[-1] == {"a": 3}
    path.write_text('{"a": 1}\nnot json\n{"a": 2}\n')
    with pytest.raises(InputError, match="line 2"):
        JsonlLog(path).load()


def test_jsonl_log_appended_to_without_loading_drops_a_torn_tail_first(tmp_path):
    """judge_failures.jsonl and runs.jsonl are only appended to: a kill mid-line must not glue
    the next run's first record onto the torn one."""
    path = tmp_path / "judge_failures.jsonl"
    path.write_text('{"a": 1}\n{"a": ')
    log = JsonlLog(path)
    log.append({"a": 2})
    log.close()
    assert JsonlLog(path).load() == [{"a": 1}, {"a": 2}]
    whole = tmp_path / "whole.jsonl"
    whole.write_text('{"a": 1}\n')
    log = JsonlLog(whole)
    log.append({"a": 2})
    log.close()
    assert whole.read_text() == '{"a": 1}\n{"a": 2}\n'


def test_crash_hook_parsing(monkeypatch):
    monkeypatch.setenv("RUBRICSTREE_EVAL_CRASH_AFTER", "2")
    hook = CrashHook()
    assert (hook.kind, hook.after, hook.kill) == ("verdicts", 2, False)
    hook.tick("generations")
    hook.tick("verdicts")
    with pytest.raises(RuntimeError, match="after 2 verdicts"):
        hook.tick("verdicts")
    with pytest.raises(RuntimeError):
        hook.guard()
    monkeypatch.setenv("RUBRICSTREE_EVAL_CRASH_AFTER", "generations:3:kill")
    hook = CrashHook()
    assert (hook.kind, hook.after, hook.kill) == ("generations", 3, True)
    monkeypatch.delenv("RUBRICSTREE_EVAL_CRASH_AFTER")
    hook = CrashHook()
    for _ in range(5):
        hook.tick("verdicts")
        hook.guard()


def test_check_settings_names_every_difference(tmp_path):
    path = tmp_path / "config.json"
    check_settings(path, {"model": "a", "grading": {"mode": "choice"}})
    check_settings(path, {"model": "a", "grading": {"mode": "choice"}})
    with pytest.raises(InputError, match=r"model: was 'a', now 'b'.*grading"):
        check_settings(path, {"model": "b", "grading": {"mode": "explain"}})
