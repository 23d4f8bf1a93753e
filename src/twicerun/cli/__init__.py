"""The command line: `twicerun run`, `judge`, `report`, `baseline` and `gate`, and `main`,
the one place a failure becomes an exit code."""

from __future__ import annotations

import os
from collections.abc import Sequence

import click
from click.core import ParameterSource

from twicerun.cli.app import ACTION_INPUTS, cli, exit_code
from twicerun.cli.pipe import reader_may_leave
from twicerun.errors import BadInput, StepCrashed, TwicerunError
from twicerun.github.commands import neutralize
from twicerun.pipeline import spawned
from twicerun.runner import interrupts
from twicerun.runner.step_output import other_threads_print_to_stderr
from twicerun.storage.space import disk_full, full_disk_advice
from twicerun.vocabulary.exits import RunExit

__all__ = ["cli", "exit_code", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point: run the CLI and return its exit code."""
    with (
        reader_may_leave(),
        interrupts.terminating(),
        spawned.removed_at_end(),
        other_threads_print_to_stderr(),
    ):
        return _main(argv)


def _main(argv: Sequence[str] | None) -> int:
    try:
        value = cli.main(
            args=list(argv) if argv is not None else None,
            prog_name="twicerun",
            standalone_mode=False,
        )
    except click.exceptions.Exit as exc:
        return exc.exit_code
    except click.Abort as exc:
        return _interrupted(getattr(exc.__cause__, "directory", None))
    except click.ClickException as exc:
        _name_the_environment(exc)
        exc.show()
        # A verb whose 2 already means something else refuses with its own code.
        command = getattr(getattr(exc, "ctx", None), "command", None)
        return getattr(command, "refused_exit", RunExit.BAD_INPUT)
    except BadInput as exc:
        click.echo(neutralize(f"twicerun: {exc}"), err=True)
        _say_kept(exc)
        return RunExit.BAD_INPUT
    except StepCrashed as exc:
        click.echo(neutralize(f"twicerun: {exc}"), err=True)
        if exc.hint:
            click.echo(neutralize(f"twicerun: {exc.hint}"), err=True)
        _say_kept(exc)
        return RunExit.CRASHED
    except TwicerunError as exc:
        click.echo(neutralize(f"twicerun: {exc}"), err=True)
        return RunExit.CRASHED
    except Exception as exc:  # a bug in twicerun: still "crashed", never "diverged"
        if interrupts.requested():
            # A query stopped for Ctrl-C fails as a query; the signal says what it was.
            return _interrupted(getattr(exc, "directory", None))
        if disk_full(exc):
            # Not a bug: the one thing to do is say which disk and what to free.
            click.echo(
                neutralize(f"twicerun: {full_disk_advice(getattr(exc, 'filename', None))}"),
                err=True,
            )
            _say_kept(exc)
            return RunExit.CRASHED
        import traceback

        click.echo(neutralize(traceback.format_exc()), err=True, nl=False)
        click.echo(neutralize(f"twicerun: internal error: {type(exc).__name__}: {exc}"), err=True)
        return RunExit.CRASHED
    # Each verb returns its own enum; the process gets the integer.
    return value if isinstance(value, int) else RunExit.CLEAN


def _interrupted(directory: str | None) -> int:
    kept = f"; the invocation directory is kept: {directory}" if directory else ""
    if interrupts.terminated():
        click.echo(f"twicerun: terminated (SIGTERM){kept}", err=True)
        return RunExit.TERMINATED
    click.echo(f"twicerun: interrupted{kept}", err=True)
    return RunExit.INTERRUPTED


def _name_the_environment(exc: click.ClickException) -> None:
    """A bad value read from a TWICERUN_ variable is named where it was set: someone who
    wrote `amplify: maybe` in a workflow never typed --amplify."""
    ctx, param = getattr(exc, "ctx", None), getattr(exc, "param", None)
    if not isinstance(exc, click.BadParameter) or ctx is None or param is None:
        return
    if ctx.get_parameter_source(param.name) is not ParameterSource.ENVIRONMENT:
        return
    names = [param.envvar] if isinstance(param.envvar, str) else list(param.envvar or ())
    envvar = next((n for n in names if n in os.environ), None)
    if envvar is None:
        return
    where = f"the environment variable {envvar}"
    if envvar in ACTION_INPUTS:
        where += f", which the action sets from its {ACTION_INPUTS[envvar]!r} input"
    exc.param_hint = f"{param.get_error_hint(ctx)} (from {where})"


def _say_kept(exc: BaseException) -> None:
    """Where a stopped invocation's directory is, when the runner said."""
    directory = getattr(exc, "directory", None)
    if directory:
        click.echo(f"twicerun: the invocation directory is kept: {directory}", err=True)


if __name__ == "__main__":
    raise SystemExit(main())
