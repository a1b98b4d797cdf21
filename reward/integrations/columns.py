"""The dataset columns a stage-3 reward needs, checked before it scores anything: without a
``rubrics`` column the recipe (``rubric_source: both``) would quietly be the tree score alone, and
``rows`` would have nothing to grade."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from reward.errors import InputError

__all__ = ["require_rubrics"]


def require_rubrics(columns: Iterable[str], rubric_source: str) -> None:
    """Refuse ``columns`` without ``rubrics`` unless ``rubric_source`` is ``tree``.

    Raises:
        InputError: naming the column, the columns there are and a near miss (``rubric``).
    """
    columns = list(columns)
    if rubric_source == "tree" or "rubrics" in columns:
        return
    near = difflib.get_close_matches("rubrics", columns, n=1, cutoff=0.6)
    hint = f" ('{near[0]}' is not read: rename it 'rubrics')" if near else ""
    raise InputError(f"the dataset has no 'rubrics' column{hint}, and rubric_source '{rubric_source}' grades each "
                     f"row's rubric items from it; its columns: {', '.join(columns) or 'none'}. Give the rows a "
                     "'rubrics' column, or set rubric_source: tree to grade the tree's leaves alone", field="rubrics")
