"""Write the inspector page: the packaged ``page.html`` template with the data embedded as JSON.

The page is one file: inline CSS and script, the data in a ``<script type="application/json">``
block (every ``<`` written as ``\\u003c`` so no text in a completion can close it), nothing
fetched. The script parses the data once and renders a page of the table, or one rollout's
details, when asked.
"""

from __future__ import annotations

import html
import json
from importlib import resources
from pathlib import Path
from typing import Any

TEMPLATE = "page.html"
PAGE_NAME = "inspector.html"


def template() -> str:
    return (resources.files("training.inspector") / TEMPLATE).read_text(encoding="utf-8")


def render(data: dict[str, Any]) -> str:
    """The page's HTML for packed ``data`` (``training.inspector.pack.build_data``)."""
    blob = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False).replace("<", "\\u003c")
    page = template().replace("__RT_TITLE__", html.escape(str(data.get("title", "inspector"))))
    head, sep, tail = page.partition("__RT_DATA__")
    if not sep:
        raise RuntimeError(f"the inspector template {TEMPLATE} has no __RT_DATA__ placeholder")
    return head + blob + tail


def write_page(data: dict[str, Any], out_dir: Path, name: str = PAGE_NAME) -> Path:
    """Write the page into ``out_dir`` (created) and return its path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / name
    tmp = path.with_suffix(".tmp")
    tmp.write_text(render(data), encoding="utf-8")
    tmp.replace(path)
    return path


def write_inspector(scores: Path, out_dir: Path, *, rollouts: Path | None = None, compare: Path | None = None,
                    compare_rollouts: Path | None = None, tree: Any = None, names: tuple[str, str] | None = None,
                    text_limit: int | None = None, title: str | None = None, note: str | None = None) -> Path:
    """Read ``scores`` (and ``compare``): a scores file or a TRL run's records folder; build the page
    and write it into ``out_dir``; its path. ``tree``: the taxonomy the scores were made with
    (default: the recorded settings' taxonomy, else the packaged one)."""
    from reward.tree import load_tree
    from training.inspector.data import load_run
    from training.inspector.pack import build_data

    if tree is None:
        from training.inspector.data import read_settings

        tree = load_tree(read_settings(scores).get("tree"))

    a_name, b_name = names or (None, None)
    runs = [load_run(scores, rollouts, a_name, tree=tree)]
    if compare is not None:
        runs.append(load_run(compare, compare_rollouts or rollouts, b_name, tree=tree))
        if runs[1].name == runs[0].name:
            runs[0].name, runs[1].name = f"A: {runs[0].name}", f"B: {runs[1].name}"
    data = build_data(runs, tree, title=title or "RubricsTree rollout inspector", note=note, text_limit=text_limit)
    return write_page(data, out_dir)
