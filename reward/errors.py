"""Exceptions that say where the bad input is: the file, the record and the field."""

from __future__ import annotations


class RubricsTreeError(Exception):
    """Base class of every error this package raises on purpose."""


class InputError(RubricsTreeError, ValueError):
    """An input file or record is invalid.

    The message always starts with the location (``file``, ``record`` and ``field`` where known)
    so a user can go straight to the offending line.
    """

    def __init__(self, message: str, *, file: str | None = None, record: str | int | None = None,
                 field: str | None = None) -> None:
        self.file, self.record, self.field, self.reason = file, record, field, message
        where = []
        if file is not None:
            where.append(str(file))
        if record is not None:
            where.append(f"record {record}")
        if field is not None:
            where.append(f"field '{field}'")
        super().__init__(f"{': '.join(where)}: {message}" if where else message)


class TaxonomyError(InputError):
    """The rubric tree YAML is invalid (duplicate id, cycle, unreachable node, missing field)."""


class ScoringError(RubricsTreeError, ValueError):
    """Scoring was asked of empty or degenerate input (it would otherwise produce NaN)."""


class JudgeError(RubricsTreeError, RuntimeError):
    """A judge call failed after its retries and the caller asked to stop on failure."""


class JudgeStopped(JudgeError):
    """The run stopped because no judge answer can come in time; what was graded is kept.
    ``exit_code`` is the command line's exit status for it."""

    exit_code = 4


class JudgeDeadlineError(JudgeStopped):
    """The run's judge deadline passed (``--deadline``)."""

    exit_code = 4


class JudgeUnavailableError(JudgeStopped):
    """The circuit breaker opened: every judge endpoint left many requests in a row unanswered."""

    exit_code = 5


class MissingDependencyError(RubricsTreeError, ImportError):
    """An optional package is needed for this feature; the message says what to install."""


class ModelNotFoundError(RubricsTreeError, FileNotFoundError):
    """A model path names nothing on disk (said at once, before any model library is imported)."""
