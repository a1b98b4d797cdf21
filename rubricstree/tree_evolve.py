"""``rubricstree tree coverage|propose|review|apply|diff``: taxonomy evolution commands.

Registered on the ``tree`` group by :func:`register`. Each command is a thin layer over
``reward.evolution`` (heavy imports inside the commands); user errors print the file, record and
field and exit 2, with no traceback.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from pathlib import Path
from typing import Any

import typer

from reward.errors import RubricsTreeError
from reward.judge.settings import JudgeSettings
from rubricstree.common_options import apply_quiet, folder_option, quiet_option
from rubricstree.errors import fail as _fail
from rubricstree.judge_options import judge_options

TaxonomyOpt = typer.Option(None, "--taxonomy", help="taxonomy YAML (default: the packaged one)")


def _judge(settings: JudgeSettings, cache_dir: Path | None, needed: bool):
    if not needed:
        return None
    from reward.judge import VerdictCache

    return settings.build(cache=VerdictCache(cache_dir / "verdicts.sqlite" if cache_dir else None))


def _setup(data: Path, taxonomy: Path | None, router: str, matcher: str, match_threshold: float,
           threshold: float | None, emergency_threshold: float | None, shortlist: int, judge):
    from reward.evolution.coverage import RouterSpec
    from reward.evolution.encoder import CachedEncoder
    from reward.evolution.matchers import make_matcher
    from reward.evolution.taxonomy_io import read_header
    from reward.healthbench.schema import load_healthbench
    from reward.tree import load_tree

    rows = load_healthbench(data)
    tree = load_tree(taxonomy)
    version = read_header(taxonomy).version
    if router not in ("embedding", "static", "llm"):
        raise typer.BadParameter(f"--router must be embedding, static or llm, got '{router}'")
    spec = RouterSpec(name=router, threshold=threshold, emergency_threshold=emergency_threshold)
    enc = CachedEncoder()
    m = make_matcher(matcher, enc, threshold=match_threshold, judge=judge, shortlist=shortlist)
    return rows, tree, version, spec, enc, m


def _warm(enc, rows, tree, progress: bool) -> None:
    """Load MiniLM and embed the rows' positive items and the leaves up front, with progress (the
    encoder memoises, so the matcher and router reuse these vectors)."""
    from reward.evolution.matchers import leaf_text
    from rubricstree.progress import step

    with step("loading all-MiniLM-L6-v2", enabled=progress):
        enc.model  # noqa: B018  (loads on first use)
    items = list(dict.fromkeys(it.criterion for r in rows for it in r.rubrics if it.points > 0))
    texts = items + [leaf_text(tree, leaf.id) for leaf in tree.leaves]
    if progress:
        import sys

        print(f"embedding {len(items)} rubric items and {len(tree.leaves)} leaves", file=sys.stderr)
    enc.encode(texts, batch_size=32, show_progress_bar=progress)


CacheDirOpt = typer.Option(None, "--cache-dir", help="verdict cache folder")
DataOpt = typer.Option(..., "--data", help="HealthBench rows (JSONL): prompt, rubrics, example_tags")
RouterOpt = typer.Option("embedding", "--router", help="embedding (default), static or llm")
MatcherOpt = typer.Option("embedding", "--matcher", help="embedding (MiniLM proxy) or llm (judge confirms)")
MatchThrOpt = typer.Option(0.55, "--match-threshold", help="embedding matcher: cosine from which a leaf matches")
ThrOpt = typer.Option(None, "--router-threshold", help="router relevance threshold")
EmThrOpt = typer.Option(None, "--router-emergency-threshold", help="router threshold for urgent prompts")
ShortlistOpt = typer.Option(5, "--shortlist", help="llm matcher: leaves asked about per item")
PROPOSALS_FILE = "proposals.yaml"  # in propose's --out folder
TAXONOMY_FILE = "taxonomy.yaml"  # in apply's --out folder
ProposeOutOpt = folder_option(..., "--out", f"output folder: {PROPOSALS_FILE}", name=PROPOSALS_FILE)
ReviewFileArg = typer.Argument(..., help="proposals YAML (decisions are saved into it)")
ApplyFileArg = typer.Argument(..., help="reviewed proposals YAML")
ApplyOutOpt = folder_option(..., "--out", f"output folder: {TAXONOMY_FILE}, the new taxonomy version (never the "
                                          "input)", name=TAXONOMY_FILE)
DiffAArg = typer.Argument(..., help="taxonomy A (before)")
DiffBArg = typer.Argument(..., help="taxonomy B (after)")


@judge_options()
def coverage(data: Path = DataOpt, taxonomy: Path | None = TaxonomyOpt, router: str = RouterOpt,
             matcher: str = MatcherOpt, match_threshold: float = MatchThrOpt, threshold: float | None = ThrOpt,
             emergency_threshold: float | None = EmThrOpt, shortlist: int = ShortlistOpt,
             examples: int = typer.Option(20, "--examples", help="uncovered items listed"),
             cache_dir: Path | None = CacheDirOpt,
             as_json: bool = typer.Option(False, "--json", help="print the report as JSON"),
             quiet: bool = quiet_option(),
             judge: JudgeSettings = None) -> None:
    """Coverage and residual ambiguity of the taxonomy on HealthBench rows (routed and all leaves)."""
    from reward.evolution.coverage import make_router, measure

    apply_quiet(quiet)
    try:
        judge = _judge(judge, cache_dir, "llm" in (router, matcher))
        rows, tree, version, spec, enc, m = _setup(data, taxonomy, router, matcher, match_threshold, threshold,
                                                   emergency_threshold, shortlist, judge)
        _warm(enc, rows, tree, progress=not quiet)
        rt = make_router(spec, tree, encoder=enc, judge=judge)
        res = asyncio.run(measure(rows, tree, rt, m, progress=not quiet, version=version))
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    s = res.summary(examples)
    s["settings"]["data"] = str(data)
    if as_json:
        typer.echo(json.dumps(s))
        return
    typer.echo(f"{tree.name} v{version} on {data} ({s['n_rows']} conversations, {s['n_items']} positive items)")
    typer.echo(f"coverage {s['coverage']:.4f}  residual ambiguity {s['residual_ambiguity']:.4f}  "
               f"(all leaves {s['all_leaves']['coverage']:.4f}; routing gap {s['routing_gap']:.4f}, "
               f"taxonomy gap {s['taxonomy_gap']:.4f})")
    for group in ("by_theme", "by_axis"):
        typer.echo(group.replace("_", " ") + ":")
        for k, v in s[group].items():
            typer.echo(f"  {k:24s} {v['coverage']:.4f} (all leaves {v['coverage_any_leaf']:.4f}, n={v['n_rows']})")


@judge_options()
def propose(data: Path = DataOpt, out: Path = ProposeOutOpt,
            taxonomy: Path | None = TaxonomyOpt, router: str = RouterOpt, matcher: str = MatcherOpt,
            match_threshold: float = MatchThrOpt, threshold: float | None = ThrOpt,
            emergency_threshold: float | None = EmThrOpt, shortlist: int = ShortlistOpt,
            lam: float = typer.Option(0.005, "--lambda", help="complexity penalty: coverage a leaf must add"),
            cluster_similarity: float = typer.Option(0.6, "--cluster-similarity", help="cosine to merge items"),
            max_proposals: int = typer.Option(10, "--max-proposals", help="heaviest gap clusters drafted"),
            drafter: str = typer.Option("offline", "--drafter", help="offline (representative item) or llm"),
            cache_dir: Path | None = CacheDirOpt,
            as_json: bool = typer.Option(False, "--json", help="print a JSON summary"),
            quiet: bool = quiet_option(),
            judge: JudgeSettings = None) -> None:
    """Cluster uncovered items, draft leaves, rank them by predicted coverage gain; writes
    --out DIR/proposals.yaml only."""
    from reward.evolution.proposals import save_proposals
    from reward.evolution.propose import ProposeSettings
    from reward.evolution.propose import propose as run

    out = out / PROPOSALS_FILE
    try:
        settings = ProposeSettings(lambda_per_leaf=lam, cluster_similarity=cluster_similarity,
                                   max_proposals=max_proposals, drafter=drafter)
        apply_quiet(quiet)
        judge = _judge(judge, cache_dir, "llm" in (router, matcher, drafter))
        rows, tree, version, spec, enc, m = _setup(data, taxonomy, router, matcher, match_threshold, threshold,
                                                   emergency_threshold, shortlist, judge)
        _warm(enc, rows, tree, progress=not quiet)
        from reward.router.base import tree_fingerprint

        base = {"source": str(taxonomy or tree.source), "name": tree.name, "version": version,
                "leaves": len(tree.leaves), "fingerprint": tree_fingerprint(tree)[:16]}
        doc = asyncio.run(run(rows, tree, spec, m, enc, settings=settings, judge=judge, base=base,
                              data=str(data), progress=not quiet))
        out.parent.mkdir(parents=True, exist_ok=True)
        save_proposals(doc, out)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    rows_out = [{"id": p.id, "leaf": p.node.id if p.node else None, "parent": p.parents,
                 "marginal_gain": p.predicted.marginal_gain if p.predicted else None,
                 "cumulative_coverage": p.predicted.cumulative_coverage if p.predicted else None,
                 "recommended": p.recommended, "lint": p.lint} for p in doc.proposals]
    if as_json:
        typer.echo(json.dumps({"out": str(out), "baseline": doc.baseline, "proposals": rows_out}))
        return
    typer.echo(f"baseline coverage {doc.baseline['coverage']:.4f}; {len(rows_out)} proposals -> {out}")
    for r in rows_out:
        typer.echo(f"  {r['id']} {r['leaf']} under {', '.join(r['parent'])}: +{r['marginal_gain']:.4f}"
                   f" -> {r['cumulative_coverage']:.4f}"
                   + ("" if r["recommended"] else " (lint: rewrite it first)" if r["lint"] else " (below lambda)"))


def review(file: Path = ReviewFileArg,
           taxonomy: Path | None = TaxonomyOpt,
           non_interactive: bool = typer.Option(False, "--non-interactive",
                                                help="no prompts: take the decision: fields as marked in the file "
                                                     "(accept / reject / pending), check the accepted ones as apply "
                                                     "would and print the predicted coverage; exit 1 if apply would "
                                                     "refuse one"),
           accept_recommended: bool = typer.Option(False, "--accept-recommended",
                                                   help="with --non-interactive: accept the pending proposals "
                                                        "ranked above lambda, reject the other pending ones"),
           as_json: bool = typer.Option(False, "--json", help="print the summary as JSON")) -> None:
    """Accept, reject or edit each proposal: in the terminal, or (--non-interactive) by the decision:
    marks you wrote in the file. Either way, lists what apply would refuse (validator, tree lint)."""
    from reward.evolution import review as rv
    from reward.evolution.proposals import load_proposals, save_proposals
    from reward.tree import load_tree

    try:
        doc = load_proposals(file)
        tree = load_tree(taxonomy)
        if accept_recommended and not non_interactive:
            raise ValueError("--accept-recommended is a non-interactive review: add --non-interactive")
        if not non_interactive:
            doc = rv.review_interactive(doc, file, ask=lambda q, d: typer.prompt(q, default=d), show=typer.echo)
        elif accept_recommended:
            doc = rv.accept_recommended(doc)
            save_proposals(doc, file)
        refused = rv.check(doc, tree)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    s = rv.summary(doc)
    s["refused"] = [r.model_dump() for r in refused]
    if as_json:
        typer.echo(json.dumps(s))
    else:
        typer.echo(f"accepted {len(s['accepted'])}, rejected {len(s['rejected'])}, pending {len(s['pending'])}")
        if s["predicted_coverage"] is not None:
            typer.echo(f"predicted coverage {s['predicted_coverage']:.4f} (baseline {s['baseline_coverage']:.4f}"
                       + ("" if s["prediction_exact"] else "; estimate: not the top of the ranking, or edited") + ")")
        for r in refused:
            typer.echo(f"would be refused: {r.proposal}: {r.reason}")
        if non_interactive and s["pending"]:
            typer.echo(f"{len(s['pending'])} still pending ({', '.join(s['pending'])}): mark decision: accept or "
                       f"reject in {file}, or add --accept-recommended")
    if refused:
        raise typer.Exit(1)


def apply(file: Path = ApplyFileArg, out: Path = ApplyOutOpt,
          taxonomy: Path | None = TaxonomyOpt,
          skip_refused: bool = typer.Option(False, "--skip-refused",
                                            help="write the version without refused proposals instead of stopping"),
          as_json: bool = typer.Option(False, "--json", help="print the result as JSON")) -> None:
    """Write a new taxonomy version with the accepted proposals and a changelog entry."""
    from reward.evolution.apply import apply_proposals
    from reward.evolution.diff import diff_trees
    from reward.evolution.proposals import load_proposals
    from reward.evolution.taxonomy_io import read_header, write_new_version
    from reward.router.base import tree_fingerprint
    from reward.tree import default_taxonomy_path, load_tree
    from reward.tree.schema import ChangelogEntry

    src = taxonomy or default_taxonomy_path()
    out = out / TAXONOMY_FILE
    try:
        from rubricstree.guards import same_file

        if same_file(out, src):  # by device and inode: a hard or symbolic link of the input too
            raise ValueError(f"--out {out} is the input taxonomy: write a new file")
        doc = load_proposals(file)
        tree = load_tree(src)
        version = read_header(src).version
        res = apply_proposals(tree, doc.proposals)
        if res.refused and not skip_refused:
            for r in res.refused:
                typer.echo(f"refused: {file}: proposal {r.proposal}: {r.reason}", err=True)
            typer.echo("error: nothing written (fix or reject these, or pass --skip-refused)", err=True)
            raise typer.Exit(2)
        if not res.applied:
            raise ValueError(f"{file}: no accepted proposal to apply")
        entry = ChangelogEntry(version=version + 1, date=dt.date.today().isoformat(),
                               summary=f"{len(res.applied)} proposal(s) from {file.name}", changes=res.changes)
        new_tree, kept = write_new_version(src, tree, res.nodes, entry, out)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    d = diff_trees(tree, new_tree, version_a=version, version_b=version + 1)
    result: dict[str, Any] = {
        "out": str(out), "version": version + 1, "applied": res.applied,
        "refused": [r.model_dump() for r in res.refused], "warnings": res.warnings, "layout_kept": kept,
        "leaves": len(new_tree.leaves), "added_leaves": [x["id"] for x in d["added_leaves"]],
        "weight_changes": len(d["weight_changes"]),
        "base_matches_proposals": doc.base.get("fingerprint") in (None, tree_fingerprint(tree)[:16])}
    if as_json:
        typer.echo(json.dumps(result))
        return
    typer.echo(f"wrote {out}: version {version + 1}, {len(new_tree.leaves)} leaves (+{len(res.applied)} change(s))"
               + ("" if kept else "; the old file's layout could not be kept, written afresh"))
    for w in res.warnings + [f"refused {r.proposal}: {r.reason}" for r in res.refused]:
        typer.echo(f"warning: {w}", err=True)
    if not result["base_matches_proposals"]:
        typer.echo("warning: the proposals were measured on another taxonomy: their predictions do not apply",
                   err=True)


def diff(a: Path = DiffAArg, b: Path = DiffBArg,
         as_json: bool = typer.Option(False, "--json", help="print JSON")) -> None:
    """Added, removed, moved and changed leaves and the weight changes from A to B."""
    from reward.evolution.diff import diff_trees, format_diff
    from reward.evolution.taxonomy_io import read_header
    from reward.tree import load_tree

    try:
        ta, tb = load_tree(a), load_tree(b)
        d = diff_trees(ta, tb, version_a=read_header(a).version, version_b=read_header(b).version)
    except (RubricsTreeError, ValueError, OSError) as exc:
        raise _fail(exc) from exc
    typer.echo(json.dumps(d) if as_json else format_diff(d))


def register(app: typer.Typer) -> None:
    """Add the evolution commands to the ``tree`` command group."""
    for fn in (coverage, propose, review, apply, diff):
        app.command(fn.__name__)(fn)
