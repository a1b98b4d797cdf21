"""Read score records, compute the inspector's statistics and pack them compactly.

A score record is one line of ``rubricstree score --out`` (a ``RolloutScore``: ``id``, ``group``,
``score``, ``leaves``, ``nodes``, ``rubric_items``, ``failures``, ``feedback``, ``not_applicable``).
The prompt and the completion come from the rollouts file the records were scored from (joined on
``id``), or from ``prompt``/``completion`` fields of the record itself (a trainer's records). A verl
rollout dump (``trainer.rollout_data_dir``) reads as a scores file too (:func:`verl_dump_record`),
and so does a folder of a TRL run's records (``<output_dir>/rubric_records/step-N.jsonl``,
``reward.integrations.records``). Rollouts of the same prompt form a group (GRPO's group): the
record's ``group`` id, else the prompt's text; a file that gives neither is refused, since ranks,
advantages and variance shares need groups.

The reward's settings (``scores.settings.json`` beside a ``score`` output, ``settings.json`` in a
records folder) say how to rescore; the figures that explain a score are in
:mod:`training.inspector.attribution`.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reward.errors import InputError

log = logging.getLogger(__name__)

UNCERTAIN = 0.15  # |p_yes - 0.5| <= this: the judge could not decide


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
    contrib: dict[str, float] = field(default_factory=dict)  # leaf id -> contribution (attribution module)
    item_contrib: list[float | None] = field(default_factory=list)
    flip: dict[str, float] = field(default_factory=dict)  # leaf id -> the score's change if that verdict flipped
    item_flip: list[float | None] = field(default_factory=list)
    orders: int = 0  # 0: the contributions are exact; else how many sampled orders estimated them
    ctx: Any = None  # attribution.Scorable: how to rescore it
    cache: dict = field(default_factory=dict)  # attribution's parts of the groups this rollout leads

    @property
    def leaves(self) -> list[dict[str, Any]]:
        return [lf for lf in self.rec.get("leaves") or [] if isinstance(lf, dict) and lf.get("leaf_id")]


@dataclass
class Run:
    """One scores file (with its rollouts)."""

    name: str
    rollouts: list[Rollout] = field(default_factory=list)
    settings: dict[str, Any] = field(default_factory=dict)  # the reward's recipe, when recorded
    unexplained: int = 0  # scored records whose contributions could not be computed
    warnings: list[str] = field(default_factory=list)  # what was read around (a cut last line)
    monitors: list[dict[str, Any]] = field(default_factory=list)  # a records folder's monitors.jsonl, by step
    monitor_limits: dict[str, float | None] = field(default_factory=dict)  # each monitor's warning threshold


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


def record_files(path: Path) -> list[Path]:
    """The JSONL files of ``path``: itself, or a records folder's ``step-*.jsonl`` (a TRL run's
    ``output_dir`` reads as its ``rubric_records`` folder)."""
    if not path.is_dir():
        return [path]
    folder = path / "rubric_records" if (path / "rubric_records").is_dir() else path
    files = sorted(folder.glob("step-*.jsonl")) or sorted(folder.glob("*.jsonl"))
    if not files:
        raise InputError("no score records here (a records folder holds step-N.jsonl files)", file=str(path))
    return files


def read_settings(path: Path) -> dict[str, Any]:
    """The reward settings recorded beside ``path`` (``X.settings.json`` beside ``X.jsonl``, or a
    records folder's ``settings.json``); empty when none was recorded."""
    folder = path / "rubric_records" if (path / "rubric_records").is_dir() else path
    for cand in ([folder / "settings.json"] if path.is_dir() else [path.with_name(path.stem + ".settings.json")]):
        if cand.is_file():
            try:
                data = json.loads(cand.read_text(encoding="utf-8"))
            except (OSError, json.JSONDecodeError) as exc:
                raise InputError(f"unreadable settings: {exc}", file=str(cand)) from exc
            return dict(data.get("reward") or {}) if isinstance(data, dict) else {}
    return {}


def settings_differences(a: dict[str, Any], b: dict[str, Any]) -> list[str]:
    """The keys whose values differ between two runs' recorded reward settings, sorted (a key one
    of them lacks counts as differing)."""
    return sorted(k for k in a.keys() | b.keys() if a.get(k, "(absent)") != b.get(k, "(absent)"))


def _records(path: Path, warnings: list[str] | None = None, *, resumable: bool = False
             ) -> Iterable[tuple[int, dict[str, Any]]]:
    """``(line number, object)`` of a JSONL file; plain ``json.loads`` (a viewer need not refuse
    duplicate keys as ``reward.jsonl`` does, and it is several times faster on large files).

    A last line without its newline that does not parse was cut by a kill mid-write (a trainer's
    records are appended line by line, as ``reward.jsonl.JsonlLog`` appends): it is skipped, and
    said in ``warnings`` and the log. Unlike ``JsonlLog.load`` the file is left as it is (a live
    run may still be appending to it), and a last line that parses is kept (a file written by hand
    may end without a newline). A bad line anywhere else is an error naming the file and line, except
    in a trainer's records folder (``resumable``): a run resumed after a kill appends after the cut
    line (``reward.integrations.records``), so there a line that does not parse is skipped, said alike."""
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
                if not line.endswith("\n") and warnings is not None:
                    note = (f"{path.name} line {lineno}: skipped a cut last line ({len(line)} characters, no "
                            "newline: the run was killed while writing it)")
                    log.warning("%s: %s", path.parent, note)
                    warnings.append(note)
                    return
                if resumable and warnings is not None:
                    note = (f"{path.name} line {lineno}: skipped a line that does not parse ({len(line.rstrip())} "
                            "characters: cut by a kill, the run resumed after it)")
                    log.warning("%s: %s", path.parent, note)
                    warnings.append(note)
                    continue
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


_RANK = re.compile(r"^s\d+-r([^-]+)-")


def _undone(rows: Iterable[dict[str, Any]]) -> dict[str, int]:
    """session -> the first step a later session scored again, for every writer session a resume
    undid (``reward.integrations.records``): session B undoes session A's steps from B's first step on
    when B started later (sessions sort by start time), B's first step is not after A's last, and B
    is not a rank of A's own launch (the ranks of one launch start at the same step; a rank's later
    session at the same first step is a restart from that step). Rows without a session are one
    session, the earliest."""
    spans: dict[str, list] = {}  # session -> [first step, last step, ranks]
    for rec in rows:
        step = rec.get("step")
        if not isinstance(step, int) or isinstance(step, bool):
            continue
        m = _RANK.match(str(rec.get("id", "")))
        rank = str(rec.get("rank", m.group(1) if m else ""))
        span = spans.setdefault(str(rec.get("session") or ""), [step, step, set()])
        span[0], span[1] = min(span[0], step), max(span[1], step)
        span[2].add(rank)
    out: dict[str, int] = {}
    for a, (a_first, a_last, a_ranks) in spans.items():
        for b, (b_first, _, b_ranks) in spans.items():
            if b > a and b_first <= a_last and (b_first > a_first or a_ranks & b_ranks):
                out[a] = min(out.get(a, b_first), b_first)
    return out


def _drop_undone(read: list, undone: dict[str, int], warnings: list[str], what: str) -> list:
    """``read`` without the rows a resume undid (``_undone``), said with a count per file."""
    def gone(rec: dict[str, Any]) -> bool:
        cut = undone.get(str(rec.get("session") or ""))
        step = rec.get("step")
        return cut is not None and isinstance(step, int) and step >= cut

    kept = [t for t in read if not gone(t[-1])]
    if len(kept) < len(read):
        dropped: dict[str, int] = {}
        for t in read:
            if gone(t[-1]):
                name = t[0].name if isinstance(t[0], Path) else what
                dropped[name] = dropped.get(name, 0) + 1
        note = (f"{what} of an earlier session left out (the run resumed from a checkpoint and scored these steps "
                "again): " + ", ".join(f"{n} in {name}" for name, n in sorted(dropped.items())))
        log.warning("%s", note)
        warnings.append(note)
    return kept


def load_run(scores: Path, rollouts: Path | None = None, name: str | None = None, *, tree: Any = None) -> Run:
    """Read a scores file or records folder (and the rollouts it was scored from): groups, ranks
    within each group and, with ``tree``, each leaf's contribution (``attribution``)."""
    rows = read_rollout_rows(rollouts) if rollouts is not None else {}
    run = Run(name=name or scores.name, settings=read_settings(scores))
    seen: dict[str, str] = {}
    ungrouped: list[str] = []
    files = record_files(scores)
    resumable = scores.is_dir()
    read = [(f, n, r) for f in files for n, r in _records(f, run.warnings, resumable=resumable)]
    if resumable:
        read = _drop_undone(read, _undone(r for _, _, r in read), run.warnings, "records")
    for path, lineno, rec in read:
        where = f"line {lineno}" if path == scores else f"{path.name} line {lineno}"
        if "id" not in rec and "input" in rec and "output" in rec:
            rec = verl_dump_record(rec, lineno, path)
        if "id" not in rec:
            raise InputError("a score record needs an id", file=str(scores), record=where, field="id")
        rid = str(rec["id"])
        if rid in seen:
            raise InputError(f"duplicate id '{rid}' (first on {seen[rid]})", file=str(scores), record=where,
                             field="id")
        seen[rid] = where
        score = rec.get("score")
        if score is not None and (isinstance(score, bool) or not isinstance(score, (int, float))
                                  or math.isnan(score)):
            raise InputError(f"score must be a number or null, got {score!r}", file=str(scores),
                             record=f"{where} (id {rid})", field="score")
        row = rows.get(rid, {})
        prompt = _messages(row.get("prompt", rec.get("prompt")))
        context = row.get("context", rec.get("context"))
        if rec.get("group") is not None:
            group = str(rec["group"])
        elif prompt:
            group = _group_key(prompt, context, rid)
        else:
            ungrouped.append(f"{where} (id {rid})")
            group = f"rollout:{rid}"
        run.rollouts.append(Rollout(id=rid, group=group, prompt=prompt,
                                    completion=_completion(row.get("completion", rec.get("completion"))),
                                    rec=rec, score=None if score is None else float(score)))
    if not run.rollouts:
        raise InputError("no score records", file=str(scores))
    if rows and not any(r.id in rows for r in run.rollouts):
        raise InputError(f"no score record's id is in the rollouts file {rollouts}: is it the file these "
                         "scores came from?", file=str(scores), field="id")
    if ungrouped:
        raise InputError(f"{len(ungrouped)} record(s) carry neither their prompt nor a group id, so rollouts cannot be "
                         "grouped by prompt (ranks, advantages and variance shares need groups): give --rollouts FILE "
                         "(the rollouts these scores came from), or score them again (rubricstree score writes a "
                         "group id)", file=str(scores), record=ungrouped[0], field="group")
    run.monitors, run.monitor_limits = read_monitors(scores, run.settings, run.warnings)
    _rank(run.rollouts)
    if tree is not None:
        from training.inspector.attribution import attach_contributions

        run.unexplained = attach_contributions(run.rollouts, tree,
                                               clip_below_zero=bool(run.settings.get("clip_below_zero", False)))
    return run


MONITOR_KEYS = ("length_correlation", "escalation_share", "refusal_share", "judge_failure_share", "leaf_drop")


def read_monitors(scores: Path, settings: dict[str, Any],
                  warnings: list[str] | None = None) -> tuple[list[dict[str, Any]], dict[str, float | None]]:
    """The gaming monitors' figures of a records folder (``monitors.jsonl``, one line per step and
    rank, ``reward.integrations.records``), in step order, and each monitor's threshold: the
    ``monitors`` its ``settings.json`` records (the reward's own thresholds), else ``settings``'
    ``monitors``, else the defaults. A cut last line is skipped with a warning; a scores file (not a
    folder) has none."""
    from reward.integrations.records import MONITORS_FILE
    from reward.settings import MonitorSettings

    if not scores.is_dir():
        return [], {}
    folder = scores / "rubric_records" if (scores / "rubric_records").is_dir() else scores  # a TRL output_dir
    path = folder / MONITORS_FILE
    if not path.is_file():
        return [], {}
    notes: list[str] = warnings if warnings is not None else []
    read = [(path, rec) for _, rec in _records(path, notes, resumable=True)]  # appended across resumes
    rows = [rec for _, rec in _drop_undone(read, _undone(rec for _, rec in read), notes, "monitor lines")]
    rows.sort(key=lambda r: (r.get("step") if isinstance(r.get("step"), int) else 0,
                             r.get("rank") if isinstance(r.get("rank"), int) else 0))
    recorded = settings.get("monitors") if isinstance(settings.get("monitors"), dict) else {}
    head = folder / "settings.json"
    if head.is_file():
        try:
            data = json.loads(head.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            data = {}  # read_settings names an unreadable file
        if isinstance(data, dict) and isinstance(data.get("monitors"), dict):
            recorded = data["monitors"]
    try:
        limits = MonitorSettings.model_validate(recorded)
    except ValueError:  # a recording of another version: the defaults, said
        if warnings is not None:
            warnings.append("the recorded monitor thresholds could not be read: the defaults are shown")
        limits = MonitorSettings()
    return rows, {k: getattr(limits, k) for k in MONITOR_KEYS}


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
