"""The result room: the Result document, its schema version, loading and saving."""

from twicerun.result.document import (
    SCHEMA,
    ArtifactOutcome,
    Comparison,
    Environment,
    Result,
    ResultFormatError,
    Series,
    StepResult,
    load_result,
    only_run_1_apart,
)

__all__ = [
    "SCHEMA",
    "ArtifactOutcome",
    "Comparison",
    "Environment",
    "Result",
    "ResultFormatError",
    "Series",
    "StepResult",
    "load_result",
    "only_run_1_apart",
]
