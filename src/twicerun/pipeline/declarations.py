"""`@step`: what a step may declare about itself, and the refusals that keep it honest.

Every mistake is refused while the pipeline file is being imported, because a
wrong declaration is a mistake in the pipeline's source: the sooner it is
said, the less anyone reads of a report built on it. Each message says what
to write instead, and none of them guesses a parameter name it cannot know.
"""

from __future__ import annotations

import difflib
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from twicerun.errors import InvalidStep

DECLARATION_ATTRIBUTE = "__twicerun_step__"
EXAMPLE_SEED = 20260101


@dataclass(frozen=True)
class StepDeclaration:
    """What a step said about itself: whether it draws on randomness, and what seeds it."""

    stochastic: bool = False
    seed: str | None = None


def declaration_of(fn: Callable[..., Any]) -> StepDeclaration:
    """The declaration a function carries, or the empty one for a plain function."""
    found = getattr(fn, DECLARATION_ATTRIBUTE, None)
    return found if isinstance(found, StepDeclaration) else StepDeclaration()


def step(fn: Callable[..., Any] | None = None, /, *, stochastic: bool = False, seed: Any = None):
    """Declare facts about a step. `@step` alone changes nothing.

    `@step(stochastic=True, seed="NAME")` says the step draws on randomness and
    that its parameter NAME seeds it; twicerun passes that parameter explicitly,
    holds it fixed across runs and records it with every result.
    """
    if fn is not None:
        if not callable(fn):
            raise InvalidStep(
                f"@step takes keyword arguments only, got {fn!r}; "
                'write @step(stochastic=True, seed="seed") or plain @step'
            )
        return _declare(fn, stochastic=False, seed=None)

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        return _declare(function, stochastic=stochastic, seed=seed)

    return decorate


def _declare(fn: Callable[..., Any], *, stochastic: Any, seed: Any) -> Callable[..., Any]:
    name = getattr(fn, "__name__", repr(fn))
    parameters = refuse_var_positional(fn)
    if not isinstance(stochastic, bool):
        raise InvalidStep(
            f"@step(stochastic={stochastic!r}) on {name}: stochastic is True or False"
        )
    after_ctx = parameters[1:]

    if seed is not None and not isinstance(seed, str):
        hint = _seed_spelling(after_ctx)
        raise InvalidStep(
            f"@step(seed={seed!r}) on {name}: seed= takes the name of the parameter that "
            f"seeds the step, not its value; write seed={hint!r} and give that parameter "
            f"the default {seed!r}"
            if hint
            else f"@step(seed={seed!r}) on {name}: seed= takes the name of the parameter "
            f"that seeds the step, not its value; add a parameter such as "
            f'`seed: int = {seed!r}` and write seed="seed"'
        )

    if seed is not None and not stochastic:
        raise InvalidStep(
            f'@step(seed="{seed}") on {name} names a seed without stochastic=True; write '
            f'@step(stochastic=True, seed="{seed}") if the step draws on randomness, '
            f"or drop seed= if it does not"
        )

    if stochastic and seed is None:
        raise InvalidStep(_missing_seed_message(name, after_ctx))

    if seed is not None:
        _check_seed_parameter(name, seed, after_ctx)

    setattr(fn, DECLARATION_ATTRIBUTE, StepDeclaration(stochastic=stochastic, seed=seed))
    return fn


def refuse_var_positional(fn: Callable[..., Any]) -> list[inspect.Parameter]:
    """Refuse `*args`, which no declared parameter can be passed through; return the parameters."""
    name = getattr(fn, "__name__", repr(fn))
    try:
        parameters = list(inspect.signature(fn).parameters.values())
    except (TypeError, ValueError):
        return []
    for p in parameters:
        if p.kind is inspect.Parameter.VAR_POSITIONAL:
            raise InvalidStep(
                f"step {name} takes *{p.name}, and twicerun calls a step with named "
                f"parameters only: replace *{p.name} with the parameters it stands for"
            )
    return parameters


def _seed_spelling(parameters: list[inspect.Parameter]) -> str | None:
    """A parameter actually called like a seed, or None: never the first int that comes along."""
    for p in parameters:
        if p.name == "seed" or p.name.endswith("_seed"):
            return p.name
    return None


def _is_int_default(p: inspect.Parameter) -> bool:
    return (
        p.default is not inspect.Parameter.empty
        and isinstance(p.default, int)
        and not isinstance(p.default, bool)
    )


def _missing_seed_message(name: str, parameters: list[inspect.Parameter]) -> str:
    head = f"@step(stochastic=True) on {name} does not say which parameter seeds it"
    spelled = _seed_spelling(parameters)
    if spelled:
        return f'{head}: write @step(stochastic=True, seed="{spelled}")'
    ints = [p.name for p in parameters if _is_int_default(p)]
    if ints:
        listed = ", ".join(ints)
        return (
            f"{head}. Its integer parameters are {listed}, and none is called seed, so "
            f'twicerun will not guess: if one of them seeds the step, write seed="<that name>"; '
            f'otherwise add `seed: int = {EXAMPLE_SEED}` and write seed="seed"'
        )
    return (
        f"{head}, and it has no integer parameter to name: add one, as in "
        f"`def {name}(ctx, seed: int = {EXAMPLE_SEED})`, and write "
        f'@step(stochastic=True, seed="seed")'
    )


def _check_seed_parameter(name: str, seed: str, parameters: list[inspect.Parameter]) -> None:
    by_name = {p.name: p for p in parameters}
    if seed not in by_name:
        if not parameters:
            raise InvalidStep(
                f'@step(seed="{seed}") on {name} names no parameter: {name} takes only ctx; '
                f"add `{seed}: int = {EXAMPLE_SEED}` to its signature"
            )
        close = difflib.get_close_matches(seed, list(by_name), n=1)
        known = ", ".join(by_name)
        suggestion = f'; did you mean seed="{close[0]}"?' if close else ""
        raise InvalidStep(
            f'@step(seed="{seed}") on {name} names no parameter; its parameters after ctx '
            f"are {known}{suggestion}"
        )
    p = by_name[seed]
    if p.kind is inspect.Parameter.VAR_KEYWORD:
        raise InvalidStep(
            f'@step(seed="{seed}") on {name} names **{seed}; name a plain parameter such as '
            f"`seed: int = {EXAMPLE_SEED}`"
        )
    if p.default is inspect.Parameter.empty:
        raise InvalidStep(
            f"the seed parameter {seed} of {name} has no default; give it one, as in "
            f"`{seed}: int = {EXAMPLE_SEED}`, so every run holds the same value"
        )
    annotation = p.annotation
    annotated_int = annotation in (inspect.Parameter.empty, int, "int")
    if not _is_int_default(p) or not annotated_int:
        shown = (
            f"defaults to {p.default!r} ({type(p.default).__name__})"
            if not _is_int_default(p)
            else f"is annotated {getattr(annotation, '__name__', annotation)}"
        )
        raise InvalidStep(
            f"the seed parameter {seed} of {name} {shown}; a seed is an integer: "
            f"write `{seed}: int = {EXAMPLE_SEED}`"
        )
