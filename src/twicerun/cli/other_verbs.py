"""An option carried from one verb to another that lacks it: which verbs take it, and why
this one does not.

`twicerun audit --runs 3` is the natural next line after `twicerun run --runs 3`, and
click alone answers "No such option '--runs'", which says neither that the option is
real nor why audit has none. Only the refusal's sentence changes: the exit code is
still the one for bad input.
"""

from __future__ import annotations

import difflib
import os
import shlex

import click

from twicerun.vocabulary.audit import Repeatability

# Why a verb has no such option, in its own terms, where a user is likely to carry one
# over from `run`. Any other option another verb takes gets only the verbs that take it.
_AUDIT_KEEPS_NOTHING = "which keeps nothing: its runs go to scratch files removed however it ends"
_AUDIT_VARIES_NOTHING = "which varies no input: it asks whether a step repeats itself"
WHY_NOT: dict[tuple[str, str], str] = {
    ("audit", "--runs"): "which runs every step exactly twice, on the inputs of one run",
    ("audit", "--run-dir"): _AUDIT_KEEPS_NOTHING,
    ("audit", "--keep"): _AUDIT_KEEPS_NOTHING,
    ("audit", "--amplify"): _AUDIT_VARIES_NOTHING,
    ("audit", "--no-amplify"): _AUDIT_VARIES_NOTHING,
    ("audit", "--without"): _AUDIT_VARIES_NOTHING,
    ("audit", "--policy"): (
        f"whose verdicts are about bytes and rows ({', '.join(map(str, Repeatability))}), "
        "which no policy changes"
    ),
}


class Verb(click.Command):
    """A command whose refusal of an unknown option names the verbs that take it."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.NoSuchOption as exc:
            taught = _taught(ctx, exc)
            if taught is None:
                raise
            raise taught from None


class Verbs(click.Group):
    """A group of verbs (`baseline`), whose commands refuse as Verb does, and which names
    the verb a mistyped one was likely meant to be."""

    command_class = Verb

    def resolve_command(self, ctx: click.Context, args: list[str]):
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            name = args[0] if args else ""
            hint = _verb_hint(ctx, self, name) if str(exc).startswith("No such command") else None
            if hint is None:
                raise
            raise click.UsageError(f"No such command {name!r}; {hint}", ctx=ctx) from None


def _verb_hint(ctx: click.Context, group: click.Group, name: str) -> str | None:
    """`twicerun pipelines/p.py` (the verb left out) says how to run it; a verb mistyped
    (`twicerun runn`) says which one it is close to. Click's sentence names neither."""
    path = ctx.command_path
    if ctx.parent is None and (name.endswith(".py") or os.path.isfile(name)):
        return f"to run a pipeline, `{path} run {shlex.quote(name)}`."
    close = difflib.get_close_matches(name, group.list_commands(ctx), n=1, cutoff=0.6)
    if close:
        return f"did you mean `{path} {close[0]}`?"
    return None


def _taught(ctx: click.Context, exc: click.NoSuchOption) -> click.NoSuchOption | None:
    name = exc.option_name
    path = ctx.command_path  # "twicerun audit", "twicerun baseline update"
    verb = path.split(" ", 1)[1] if " " in path else path
    takers = [other for other in _verbs_taking(ctx.find_root(), name) if other != verb]
    if not takers:
        return None
    why = WHY_NOT.get((verb, name))
    listed = ", ".join(f"`twicerun {t}`" for t in takers[:-1])
    listed = f"{listed} and `twicerun {takers[-1]}`" if listed else f"`twicerun {takers[0]}`"
    verb_of = "takes" if len(takers) == 1 else "take"
    message = (
        f"No such option {name!r} for `{path}`"
        + (f", {why}" if why else "")
        + f"; {listed} {verb_of} {name}."
    )
    return click.NoSuchOption(name, message=message, ctx=ctx)


def _verbs_taking(root: click.Context, name: str) -> list[str]:
    """Every verb of the root group (a group's by 'group verb') with option `name`,
    in the order --help lists them. Imports each verb's module: a refusal only."""
    found: list[str] = []

    def walk(group: click.Group, context: click.Context, prefix: str) -> None:
        for sub in group.list_commands(context):
            command = group.get_command(context, sub)
            if command is None:
                continue
            if isinstance(command, click.Group):
                walk(command, context, f"{prefix}{sub} ")
                continue
            if any(
                name in (*p.opts, *p.secondary_opts)
                for p in command.params
                if isinstance(p, click.Option)
            ):
                found.append(f"{prefix}{sub}")

    if isinstance(root.command, click.Group):
        walk(root.command, root, "")
    return found
