"""Read score records, compute the inspector's statistics and pack them compactly.

A score record is one line of ``rubricstree score --out`` (a ``RolloutScore``: ``id``, ``score``,
``leaves``, ``nodes``, ``rubric_items``, ``failures``, ``feedback``, and ``not_applicable`` when
the scorer records leaves it judged not applicable). The prompt and the completion come from the
rollouts file the records were scored from (joined on ``id``), or from ``prompt``/``completion``
fields of the record itself (trainer logs). A verl rollout dump (``trainer.rollout_data_dir``) reads
as a scores file too (:func:`verl_dump_record`). Rollouts of the same prompt form a group (GRPO's
group: the advantage is the score minus the group's mean).

Within-group variance share of a leaf (see ``docs/inspector.md``): with ``s_r`` the score of
rollout ``r`` in group ``g`` and ``c_rl = a_r * w_rl * pass_rl / sum_l' w_rl'`` the leaf's linear
part of the tree score (``a_r``: the tree's share of the score, 1, 1/2 under ``combine: mean``
with rubric items, 0 when the points score alone decides; 0 for a leaf not routed in ``r``),
``share_l = sum_g sum_r (c_rl - mean_g c_l)(s_r - mean_g s) / sum_g sum_r (s_r - mean_g s)^2``.
The shares of all leaves plus ``other`` (the rubric items, the penalty variants' non-linear part,
format failures) add up to 1. Only scored rollouts of groups with two or more of them count.
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reward.errors import InputError

UNCERTAIN = 0.15  # |p_yes - 0.5| <= this: the judge could not decide
CHANGED = 0.5  # --compare: a leaf's met rate on a prompt moved by at least this much


@dataclass
class Rollout:
    """One scored rollout, normalised from a score record (and its rollout row)."""

    id: str
    group: str
    prompt: list[dict[str, str]]
    completion: str
    rec: dict[str, Any]
    score: float | None = None
    rank: int | None = None
    group_size: int = 1

    @property
    def leaves(self) -> list[dict[str, Any]]:
        return [lf for lf in self.rec.get("leaves") or [] if isinstance(lf, dict) and lf.get("leaf_id")]

    @property
    def tree_share(self) -> float:
        """``a_r``: how much of the score is the tree score (see the module docstring)."""
        if self.rec.get("tree_score") is None or not self.leaves:
            return 0.0
        if self.rec.get("points_score") is None:
            return 1.0
        return {"tree": 1.0, "mean": 0.5, "points": 0.0}.get(str(self.rec.get("combine", "tree")), 1.0)

    def contributions(self) -> dict[str, float]:
        """Leaf id -> its linear part of the score (``c_rl``)."""
        leaves = [lf for lf in self.leaves if isinstance(lf.get("weight"), (int, float))]
        total = sum(float(lf["weight"]) for lf in leaves)
        a = self.tree_share
        if not total or not a:
            return {}
        return {lf["leaf_id"]: a * float(lf["weight"]) * float(lf.get("passed") or 0.0) / total for lf in leaves}


@dataclass
class Run:
    """One scores file (with its rollouts)."""

    name: str
    rollouts: list[Rollout] = field(default_factory=list)


def not_applicable(rec: dict[str, Any]) -> list[tuple[str, str]]:
    """``(leaf id, reason)`` of the leaves the scorer judged not applicable, in any of the shapes a
    record may carry them (a list of ids, a list of ``{"leaf_id", "reason"?}``, or id -> reason);
    none when the record has no such field."""
    raw = rec.get("not_applicable")
    if raw is None:
        raw = rec.get("inapplicable")
    out: list[tuple[str, str]] = []
    if isinstance(raw, dict):
        out = [(str(k), "" if v is None or isinstance(v, bool) else str(v)) for k, v in raw.items()]
    elif isinstance(raw, list):
        for x in raw:
            if isinstance(x, str):
                out.append((x, ""))
            elif isinstance(x, dict) and (x.get("leaf_id") or x.get("id")):
                out.append((str(x.get("leaf_id") or x.get("id")), str(x.get("reason") or x.get("title") or "")))
    return out


def _messages(prompt: Any) -> list[dict[str, str]]:
    if isinstance(prompt, str):
        return [{"role": "user", "content": prompt}]
    if isinstance(prompt, list):
        return [{"role": str(m.get("role", "user")), "content": str(m.get("content", ""))}
                for m in prompt if isinstance(m, dict)]
    return []


def _completion(c: Any) -> str:
    if isinstance(c, list):  # conversational completions: [{"role": "assistant", "content": ...}]
        return "".join(str(m.get("content", "")) for m in c if isinstance(m, dict))
    return "" if c is None else str(c)


def _group_key(prompt: list[dict[str, str]], context: Any, fallback: str) -> str:
    if not prompt:
        return f"rollout:{fallback}"
    blob = json.dumps([prompt, context], sort_keys=True, ensure_ascii=False)
    return hashlib.sha1(blob.encode("utf-8")).hexdigest()[:16]


def _records(path: Path) -> Iterable[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a JSONL file; plain ``json.loads`` (a viewer need not refuse
    duplicate keys as ``reward.jsonl`` does, and it is several times faster on large files)."""
    try:
        fh = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read: {exc.strerror}", file=str(path)) from exc
    with fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                raise InputError(f"invalid JSON: {exc.msg}", file=str(path), record=f"line {lineno}") from exc
            if not isinstance(obj, dict):
                raise InputError("each line must be a JSON object", file=str(path), record=f"line {lineno}")
            yield lineno, obj


def read_rollout_rows(path: Path) -> dict[str, dict[str, Any]]:
    """id -> rollout row (prompt, completion, context), read loosely: only what the page shows."""
    rows: dict[str, dict[str, Any]] = {}
    for lineno, obj in _records(path):
        if "id" not in obj:
            raise InputError("a rollout needs an id", file=str(path), record=f"line {lineno}", field="id")
        rows[str(obj["id"])] = obj
    return rows


def verl_dump_record(row: dict[str, Any], lineno: int, path: Path) -> dict[str, Any]:
    """A line of verl's rollout dump (``trainer.rollout_data_dir/<step>.jsonl``: ``input``,
    ``output``, ``score``, ``step`` and our extra info) as a score record: the full record from
    ``rubric_record`` when the reward wrote one (``log_records: true``), else what the line says."""
    rec: dict[str, Any] = {}
    raw = row.get("rubric_record")
    if isinstance(raw, str) and raw.strip():
        try:
            rec = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise InputError(f"rubric_record is not JSON: {exc.msg}", file=str(path), record=f"line {lineno}",
                             field="rubric_record") from exc
    rec["id"] = f"step{row.get('step', '?')}-{lineno}"
    rec["prompt"], rec["completion"] = str(row["input"]), str(row["output"])
    score = row.get("score")
    if row.get("unscored"):  # the manager's stand-in score (group mean): shown unscored, with the reason
        rec["failures"] = [str(row.get("unscored_reason") or "unscored")] + list(rec.get("failures") or [])
        score = None
    rec["score"] = score
    for key in ("tree_score", "points_score"):
        rec.setdefault(key, row.get(key))
    return rec


def load_run(scores: Path, rollouts: Path | None = None, name: str | None = None) -> Run:
    """Read a scores file (and the rollouts it was scored from): groups, ranks within each group."""
    rows = read_rollout_rows(rollouts) if rollouts is not None else {}
    run = Run(name=name or scores.name)
    seen: dict[str, int] = {}
    for lineno, rec in _records(scores):
        where = f"line {lineno}"
        if "id" not in rec and "input" in rec and "output" in rec:
            rec = verl_dump_record(rec, lineno, scores)
        if "id" not in rec:
            raise InputError("a score record needs an id", file=str(scores), record=where, field="id")
        rid = str(rec["id"])
        if rid in seen:
            raise InputError(f"duplicate id '{rid}' (first on line {seen[rid]})", file=str(scores), record=where,
                             field="id")
        seen[rid] = lineno
        score = rec.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                                  or math.isnan(score)):
            raise InputError(f"score must be a number or null, got {score!r}", file=str(scores),
                             record=f"{where} (id {rid})", field="score")
        row = rows.get(rid, {})
        prompt = _messages(row.get("prompt", rec.get("prompt")))
        context = row.get("context", rec.get("context"))
        group = str(rec["group"]) if rec.get("group") is not None and not prompt else _group_key(prompt, context, rid)
        run.rollouts.append(Rollout(id=rid, group=group, prompt=prompt,
                                    completion=_completion(row.get("completion", rec.get("completion"))),
                                    rec=rec, score=None if score is None else float(score)))
    if not run.rollouts:
        raise InputError("no score records", file=str(scores))
    if rows and not any(r.id in rows for r in run.rollouts):
        raise InputError(f"no score record's id is in the rollouts file {rollouts}: is it the file these "
                         "scores came from?", file=str(scores), field="id")
    _rank(run.rollouts)
    return run


def _groups(rollouts: Iterable[Rollout]) -> dict[str, list[Rollout]]:
    out: dict[str, list[Rollout]] = {}
    for r in rollouts:
        out.setdefault(r.group, []).append(r)
    return out


def _rank(rollouts: Sequence[Rollout]) -> None:
    """Rank 1 is the group's best scored rollout (ties share the better rank)."""
    for members in _groups(rollouts).values():
        scored = sorted((r.score for r in members if r.score is not None), reverse=True)
        for r in members:
            r.group_size = len(members)
            r.rank = None if r.score is None else scored.index(r.score) + 1


def leaf_variance_shares(rollouts: Sequence[Rollout]) -> tuple[dict[str, float], float, float]:
    """``({leaf id: share}, other share, within-group variance)`` (see the module docstring);
    the variance is the mean squared deviation from the group mean over the counted rollouts."""
    num: dict[str, float] = {}
    var = 0.0
    resid = 0.0
    n = 0
    for members in _groups(rollouts).values():
        scored = [r for r in members if r.score is not None]
        if len(scored) < 2:
            continue
        mean_s = sum(r.score for r in scored) / len(scored)  # type: ignore[misc]
        contribs = [r.contributions() for r in scored]
        ids = {lid for c in contribs for lid in c}
        mean_c = {lid: sum(c.get(lid, 0.0) for c in contribs) / len(scored) for lid in ids}
        for r, c in zip(scored, contribs):
            d = r.score - mean_s  # type: ignore[operator]
            var += d * d
            n += 1
            lin = 0.0
            for lid in ids:
                dc = c.get(lid, 0.0) - mean_c[lid]
                num[lid] = num.get(lid, 0.0) + dc * d
                lin += dc
            resid += (d - lin) * d
    if var <= 1e-12:
        return {}, 0.0, 0.0
    return {k: v / var for k, v in num.items()}, resid / var, var / n


def leaf_counts(rollouts: Sequence[Rollout]) -> dict[str, dict[str, int]]:
    """Leaf id -> counts over the file: routed, met (criterion met), failed (the check failed the
    rollout: pass < 0.5), uncertain (|p_yes - 0.5| <= UNCERTAIN), judge failures, not applicable."""
    out: dict[str, dict[str, int]] = {}

    def get(lid: str) -> dict[str, int]:
        return out.setdefault(lid, {"routed": 0, "met": 0, "failed": 0, "uncertain": 0, "errors": 0, "na": 0})

    for r in rollouts:
        for lf in r.leaves:
            c = get(lf["leaf_id"])
            c["routed"] += 1
            if lf.get("failure"):
                c["errors"] += 1
                continue
            c["met"] += bool(lf.get("met"))
            passed = lf.get("passed")
            c["failed"] += isinstance(passed, (int, float)) and passed < 0.5
            p = lf.get("p_yes")
            c["uncertain"] += isinstance(p, (int, float)) and abs(p - 0.5) <= UNCERTAIN
        for lid, _ in not_applicable(r.rec):
            get(lid)["na"] += 1
    return out


def met_rates(members: Sequence[Rollout]) -> dict[str, float]:
    """Leaf id -> the share of the rollouts that routed it whose criterion was met."""
    hits: dict[str, list[int]] = {}
    for r in members:
        for lf in r.leaves:
            if not lf.get("failure"):
                hits.setdefault(lf["leaf_id"], []).append(int(bool(lf.get("met"))))
    return {k: sum(v) / len(v) for k, v in hits.items()}


def compare_groups(a: Run, b: Run) -> list[dict[str, Any]]:
    """Prompts in both runs: mean scores and the leaves whose verdicts changed (met rate moved by
    CHANGED or more, or routed on one side only), largest score change first."""
    ga, gb = _groups(a.rollouts), _groups(b.rollouts)
    out = []
    for key in ga.keys() & gb.keys():
        ra, rb = met_rates(ga[key]), met_rates(gb[key])
        changed = []
        for lid in sorted(ra.keys() | rb.keys()):
            x, y = ra.get(lid), rb.get(lid)
            if x is None or y is None or abs(x - y) >= CHANGED - 1e-9:
                changed.append((lid, x, y))
        sa = [r.score for r in ga[key] if r.score is not None]
        sb = [r.score for r in gb[key] if r.score is not None]
        ma = sum(sa) / len(sa) if sa else None
        mb = sum(sb) / len(sb) if sb else None
        out.append({"group": key, "a": ma, "b": mb, "changed": changed})
    out.sort(key=lambda g: -abs((g["b"] or 0.0) - (g["a"] or 0.0)) if g["a"] is not None and g["b"] is not None
             else 0.0)
    return out

