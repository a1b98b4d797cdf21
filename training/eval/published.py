"""Published reference figures (``published.yaml``), validated, for ``eval compare --published``.

Each figure is another lab's number copied from a paper, with its source, grader and setting;
the plot draws them as dashed reference lines labelled "(copied)", never as runs of ours, and only
for the benchmark being compared. Figures without a printed number (``score: null``) stay in the
file as pointers and are left out of plots.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from reward.errors import InputError

DEFAULT_FILE = Path(__file__).with_name("published.yaml")


class PublishedFigure(BaseModel):
    """One published number."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    model: str
    benchmark: str = Field(description="healthbench-hard, healthbench-professional, medxpertqa, medqa, ...")
    score: float | None = Field(None, ge=0.0, le=1.0, description="a fraction (a percentage / 100)")
    grader: str
    setting: str
    source: str
    copied: bool = Field(description="True: the number is printed in the source as given here")


class PublishedFile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    references: list[PublishedFigure]


def load_published(path: str | Path | None = None) -> list[PublishedFigure]:
    """The figures of ``path`` (default: the packaged ``published.yaml``).

    Raises:
        InputError: the file is missing or a record is invalid (names the record and field).
    """
    from reward.textio import load_yaml

    path = Path(path) if path is not None else DEFAULT_FILE
    if not path.is_file():
        raise InputError("published figures file not found", file=str(path))
    try:
        return PublishedFile.model_validate(load_yaml(path)).references
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = err["loc"]
        record = loc[1] if len(loc) > 1 and loc[0] == "references" else None
        raise InputError(err["msg"], file=str(path), record=record,
                         field=".".join(map(str, loc[2:])) or None) from exc


def benchmark_key(metrics: dict) -> str | None:
    """The published benchmark name an evaluation folder's metrics correspond to."""
    if metrics.get("benchmark") == "mcq":
        fmt = (metrics.get("data") or {}).get("format")
        return str(fmt) if fmt else None
    variant = (metrics.get("data") or {}).get("variant")
    return f"healthbench-{variant}" if variant else None


def figures_for(benchmark: str | None, figures: list[PublishedFigure]) -> list[PublishedFigure]:
    """The figures with a number for ``benchmark``."""
    return [f for f in figures if benchmark and f.benchmark == benchmark and f.score is not None]
