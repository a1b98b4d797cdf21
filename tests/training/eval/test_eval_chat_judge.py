"""``rubricstree eval healthbench`` end to end over the chat API: the tiny model answers
in-process, our OpenAI-compatible chat server on 127.0.0.1 grades with an official-style template
(the reference placeholders, our wording), and the HealthBench score the command prints is checked
against a score computed here, independently, from the verdicts the server gave, overall and for
every tag. The server also injects faults: 429 with Retry-After, 5xx, malformed answers, and one
item that keeps failing, whose example must be unscored (never scored as "not met") until a rerun
grades it.

The figures are wiring (a random-weight model's answers, verdicts from a hash), not quality."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
from rt_chat_server import ChatServer, default_decide
from rt_paths import TESTS_DIR
from typer.testing import CliRunner

from rubricstree import app

pytestmark = pytest.mark.slow

FIXTURE = TESTS_DIR / "fixtures" / "eval_hb_own.jsonl"
TEMPLATE = """Read the conversation and judge only its final assistant turn against the rubric item.

# Conversation
<<conversation>>

# Rubric item
<<rubric_item>>

# Answer format
Reply with a JSON object holding "explanation" (a string) and "criteria_met" (true or false), in a json code block.
"""


def _points_score(rub: list[dict], met: list[bool], idx) -> float | None:
    possible = sum(rub[i]["points"] for i in idx if rub[i]["points"] > 0)
    return None if possible <= 0 else sum(rub[i]["points"] for i in idx if met[i]) / possible


def independent_scores(rows: list[dict], ids: set[str]) -> tuple[float, dict[str, float]]:
    """HealthBench scoring written out again from its definition, on the server's verdicts."""
    overall: list[float] = []
    per_tag: dict[str, list[float]] = defaultdict(list)
    for row in rows:
        if row["prompt_id"] not in ids:
            continue
        rub = row["rubrics"]
        met = [default_decide(f"[{r['points']}] {r['criterion']}") for r in rub]

        s = _points_score(rub, met, range(len(rub)))
        overall.append(s)
        for t in row["example_tags"]:
            per_tag[t].append(s)
        for t in {t for r in rub for t in r["tags"]}:
            v = _points_score(rub, met, [i for i, r in enumerate(rub) if t in r["tags"]])
            if v is not None:
                per_tag[t].append(v)

    def clipped(xs):
        return min(1.0, max(0.0, sum(xs) / len(xs)))

    return clipped(overall), {t: clipped(v) for t, v in per_tag.items()}


def test_eval_over_the_chat_api_reproduces_the_independent_score(tmp_path, tiny_model_dir):
    rows = [json.loads(x) for x in FIXTURE.read_text().splitlines() if x.strip()]
    template = tmp_path / "official_style.txt"
    template.write_text(TEMPLATE)
    key = {(r["prompt_id"], i): f"[{it['points']}] {it['criterion']}"
           for r in rows for i, it in enumerate(r["rubrics"])}
    out = tmp_path / "eval"
    args = ["eval", "healthbench", "--model", str(tiny_model_dir), "--data", str(FIXTURE), "--out", str(out),
            "--judge-api", "chat", "--judge-template", str(template), "--judge-mode", "explain",
            "--max-new-tokens", "8", "--no-thinking"]
    runner = CliRunner()
    with ChatServer() as srv:
        srv.faults = {key[("evalown-001", 0)]: ["429"], key[("evalown-003", 1)]: ["500"],
                      key[("evalown-004", 2)]: ["malformed"]}
        srv.always = {key[("evalown-002", 1)]: "malformed"}
        first = runner.invoke(app, [*args, "--judge-url", srv.url, "--json"])
        assert first.exit_code == 0, first.output
        m1 = json.loads((out / "metrics.json").read_text())
        srv.always.clear()
        n_before = len(srv.requests)
        second = runner.invoke(app, [*args, "--judge-url", srv.url, "--json"])
        assert second.exit_code == 0, second.output
        regraded = srv.requests[n_before:]
    m2 = json.loads((out / "metrics.json").read_text())

    # run 1: the item that kept failing leaves its example unscored, not scored as "not met"
    assert m1["n_unscored"] == 1 and m1["unscored"][0]["prompt_id"] == "evalown-002"
    assert "unparseable" in m1["unscored"][0]["reason"]
    score, tags = independent_scores(rows, {"evalown-001", "evalown-003", "evalown-004"})
    assert m1["score"] == pytest.approx(score)
    assert set(m1["tags"]) == set(tags)
    for t, v in tags.items():
        assert m1["tags"][t]["score"] == pytest.approx(v), t

    # run 2 (a rerun): only the missing item is graded; now every example is scored
    assert len(regraded) == 1 and key[("evalown-002", 1)] in regraded[0]["messages"][-1]["content"]
    score, tags = independent_scores(rows, {r["prompt_id"] for r in rows})
    assert m2["n_unscored"] == 0 and m2["score"] == pytest.approx(score)
    assert set(m2["tags"]) == set(tags)
    for t, v in tags.items():
        assert m2["tags"][t]["score"] == pytest.approx(v), t

    # the grader saw the conversation as the reference harness renders it: system turn included,
    # the response appended as the last assistant turn
    gens = {g["prompt_id"]: g["response"]
            for g in map(json.loads, (out / "generations.jsonl").read_text().splitlines())}
    row3 = next(r for r in rows if r["prompt_id"] == "evalown-003")
    convo = ("\n\n".join(f"{m['role']}: {m['content']}" for m in row3["prompt"])
             + f"\n\nassistant: {gens['evalown-003']}")
    assert any(f"# Conversation\n{convo}\n\n# Rubric item\n{key[('evalown-003', 0)]}\n" in b["messages"][-1]["content"]
               for b in srv.requests)

    # recorded settings and the comparability verdict with its reasons
    assert m2["generation"]["max_new_tokens"] == 8 and m2["generation"]["thinking"] is False
    assert m2["grading"]["judge_backend"] == "chat" and m2["grading"]["judge_model"] == "grader-under-test"
    assert m2["comparable_to_published"] is False
    notes = " | ".join(m2["comparability_notes"])
    for reason in ("not gpt-4.1", "not the official", "not a published HealthBench file"):
        assert reason in notes
    assert "unscored" in " | ".join(m1["comparability_notes"]) and "unscored" not in notes
    assert (out / "report.md").read_text().count("Not comparable to published") == 1


OWN_REFERENCE_STYLE = """Score the last assistant turn of the conversation on one rubric item.

# Conversation
<<conversation>>

# Rubric item
<<rubric_item>>

# Output
A json object with "explanation" and "criteria_met", in markdown, nothing else."""


def test_grader_official_path_end_to_end(tmp_path, tiny_model_dir, monkeypatch):
    """--grader official: the template is fetched from the reference harness's source (the network
    simulated at httpx.get, serving a harness file with OUR wording; the pin is moved to its hash),
    sent with the reference grader's system message, and the comparability verdict drops the
    template and grader reasons, keeping the data-file one (our fixture is no published file) and
    the endpoint one (a stub on 127.0.0.1 that answers to gpt-4.1 is not OpenAI's gpt-4.1)."""
    import httpx

    import reward.judge.official as official

    source = f'GRADER_TEMPLATE = """\n{OWN_REFERENCE_STYLE}\n""".strip()\n'
    real_get = httpx.get

    def fake_get(url, **kw):
        if "raw.githubusercontent.com" in str(url):
            return httpx.Response(200, text=source, request=httpx.Request("GET", url))
        return real_get(url, **kw)

    monkeypatch.setattr(httpx, "get", fake_get)
    monkeypatch.setattr(official, "OFFICIAL_TEMPLATE_SHA256", official.text_sha256(OWN_REFERENCE_STYLE))
    out = tmp_path / "eval"
    rows = [json.loads(x) for x in FIXTURE.read_text().splitlines() if x.strip()]
    first = rows[0]["rubrics"]
    keys = [f"[{it['points']}] {it['criterion']}" for it in first]
    with ChatServer() as srv:
        # answers a lenient parse would take are asked again, unchanged, as the reference grader does
        srv.faults = {keys[0]: ["prose", "malformed"], keys[1]: ["stringbool"]}
        res = CliRunner().invoke(app, [
            "eval", "healthbench", "--model", str(tiny_model_dir), "--data", str(FIXTURE), "--out", str(out),
            "--judge-url", srv.url, "--judge-api", "chat", "--served-model", "gpt-4.1", "--judge-revision", "stub", "--grader", "official",
            "--max-new-tokens", "4", "--no-thinking", "--limit", "1", "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert m["grading"]["template"] == official.OFFICIAL_NAME and m["grading"]["judge_model"] == "gpt-4.1"
    # the request bodies the stub grader logged carry the reference grader's settings, every attempt alike
    assert len(srv.requests) == len(first) + 3
    for body in srv.requests:
        assert body["model"] == "gpt-4.1"
        assert body["temperature"] == 0.5 and body["max_tokens"] == 2048
        assert set(body) == {"model", "messages", "temperature", "max_tokens"}  # no response_format, seed, ...
        assert body["messages"][0] == {"role": "system", "content": official.GRADER_SYSTEM_MESSAGE}
        assert body["messages"][1]["content"].startswith("Score the last assistant turn")
    by_item = defaultdict(list)
    for body in srv.requests:
        by_item[body["messages"][1]["content"]].append(body)
    assert sorted(len(v) for v in by_item.values())[-2:] == [2, 3]
    assert all(b == v[0] for v in by_item.values() for b in v)  # retried at the same settings
    assert m["n_unscored"] == 0
    assert m["grading"]["sampling"] == {**official.reference_grader_record(), "attempts": 10}
    # the stub answers to gpt-4.1 on 127.0.0.1: the name passes, the endpoint does not (any server
    # can answer to that name); the template and grader settings are the reference ones
    assert m["grading"]["judge_endpoints"] == [srv.url.rstrip("/") + ("" if srv.url.rstrip("/").endswith("/v1")
                                                                        else "/v1")]
    endpoint = [n for n in m["comparability_notes"] if "the grader named 'gpt-4.1'" in n]
    assert len(endpoint) == 1 and "not by OpenAI" in endpoint[0]
    notes = " | ".join(n for n in m["comparability_notes"] if n not in endpoint)
    assert "not gpt-4.1" not in notes and "grader template" not in notes and "grader " not in notes.replace(
        "grader model", "")
    assert "not a published HealthBench file" in notes and m["comparable_to_published"] is False


def test_official_body_with_its_own_system_section_is_not_the_reference_grader(tmp_path, tiny_model_dir,
                                                                                 monkeypatch):
    """A --judge-template file with the official body but another system message is graded with
    our judge's defaults and named not comparable, for the system message."""
    import reward.judge.official as official

    monkeypatch.setattr(official, "OFFICIAL_TEMPLATE_SHA256", official.text_sha256(OWN_REFERENCE_STYLE))
    template = tmp_path / "mixed.txt"
    template.write_text("You grade rubric items for a hospital.\n---user---\n" + OWN_REFERENCE_STYLE)
    out = tmp_path / "eval"
    with ChatServer() as srv:
        res = CliRunner().invoke(app, [
            "eval", "healthbench", "--model", str(tiny_model_dir), "--data", str(FIXTURE), "--out", str(out),
            "--judge-url", srv.url, "--judge-api", "chat", "--served-model", "gpt-4.1", "--judge-revision", "stub",
            "--judge-template", str(template), "--max-new-tokens", "4", "--no-thinking", "--limit", "1", "--json"])
    assert res.exit_code == 0, res.output
    m = json.loads((out / "metrics.json").read_text())
    assert srv.requests[0]["temperature"] == 0.0 and srv.requests[0]["max_tokens"] == 512
    notes = m["comparability_notes"]
    assert any("system message" in n for n in notes)
    assert not any("grader template" in n for n in notes)  # the body IS the (pinned) reference body
    assert any("grader temperature is 0.0" in n for n in notes) and any("max_tokens is 512" in n for n in notes)
