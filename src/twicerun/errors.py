"""The errors twicerun raises, in the two families the exit codes distinguish.

This module is the one leaf every room may import: it holds no behaviour,
only the types that let `cli` map a failure to its exit code without any
room below it deciding how the process ends.
"""

from __future__ import annotations


class TwicerunError(Exception):
    """Base of every error twicerun raises on purpose.

    `directory` is set by the runner when the error stopped an invocation
    whose directory was kept, so the message can say where to look.
    """

    directory: str | None = None


class BadInput(TwicerunError):
    """Something the user handed us is wrong; nothing was measured (exit 2)."""


class PipelineError(BadInput):
    """The pipeline file cannot be loaded, or defines no steps."""


class NoSteps(PipelineError):
    """The file imports, and defines no steps: a module beside the pipelines, if a glob found it."""


class InvalidStep(BadInput, TypeError):
    """A `@step` declaration is wrong; raised while the pipeline is imported."""


class ContractError(BadInput):
    """A step used `ctx` in a way the pipeline contract refuses."""


class UnknownArtifact(ContractError):
    """`ctx.read` named an artifact no earlier step wrote."""

    def __init__(self, message: str, *, name: str = ""):
        super().__init__(message)
        self.name = name


class UnsupportedColumn(BadInput):
    """An artifact has a column type the oracle does not know how to compare."""


class EngineUnavailable(BadInput):
    """The pipeline's engine cannot start here (pyspark or Java missing); nothing ran."""


class UsageError(BadInput):
    """A command-line value is wrong (a --key naming no column, say)."""


class StepTimedOut(BaseException):
    """A step ran past --step-timeout and was stopped. A BaseException, as KeyboardInterrupt
    is, so that a step's own `except Exception` cannot swallow it and carry on."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        super().__init__(f"it ran longer than --step-timeout {seconds:g}s")


class StepCrashed(TwicerunError):
    """A step raised; that run stopped and the invocation directory was kept (exit 3)."""

    def __init__(
        self,
        *,
        index: int,
        name: str,
        run: int,
        error: BaseException,
        where: str,
        hint: str = "",
        shown: str = "",
    ):
        self.index = index
        self.name = name
        self.run = run
        self.error = error
        self.where = where
        # The error's message as reports show it, where that is not all of str(error)
        # (Spark's, without the query plan it appends); the receipt keeps all of it.
        self.shown = shown or str(error)
        # Its type and message, as every report of the step's failure names it.
        self.said = f"{type(error).__name__}: {self.shown}"
        # What to do about it, when twicerun can tell: printed on a line of its own.
        self.hint = hint
        # What an audit had found before the step raised (replay.audit_runs), to report.
        self.audited: list = []
        at = f" (at {where})" if where else ""
        if isinstance(error, StepTimedOut):
            super().__init__(f"step {index} {name} was stopped in run {run}{at}: {error}")
            return
        super().__init__(f"step {index} {name} raised in run {run}{at}: {self.said}".rstrip())
