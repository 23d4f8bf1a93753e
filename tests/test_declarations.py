"""`@step` declarations: what they accept, and every refusal with its exact message."""

from __future__ import annotations

import pytest

from twicerun import InvalidStep, step
from twicerun.pipeline import StepDeclaration, declaration_of


def test_a_bare_step_decorator_changes_nothing():
    def make(ctx):
        return "called"

    assert step(make) is make
    assert declaration_of(make) == StepDeclaration()
    assert make(None) == "called"


def test_step_with_empty_parentheses_changes_nothing():
    @step()
    def make(ctx):
        pass

    assert declaration_of(make) == StepDeclaration()


def test_a_seeded_stochastic_step_records_its_seed_parameter():
    @step(stochastic=True, seed="seed")
    def sample(ctx, seed: int = 20260101):
        pass

    assert declaration_of(sample) == StepDeclaration(stochastic=True, seed="seed")


def test_a_plain_function_has_the_empty_declaration():
    def plain(ctx):
        pass

    assert declaration_of(plain) == StepDeclaration()


def refusal(decorate, fn) -> str:
    with pytest.raises(InvalidStep) as info:
        decorate(fn)
    return str(info.value)


def test_stochastic_without_a_seed_suggests_the_parameter_called_seed():
    def sample(ctx, seed: int = 7):
        pass

    assert refusal(step(stochastic=True), sample) == (
        "@step(stochastic=True) on sample does not say which parameter seeds it: "
        'write @step(stochastic=True, seed="seed")'
    )


def test_stochastic_without_a_seed_does_not_guess_among_integer_parameters():
    def sample(ctx, iterations: int = 100, rows: int = 10):
        pass

    assert refusal(step(stochastic=True), sample) == (
        "@step(stochastic=True) on sample does not say which parameter seeds it. Its integer "
        "parameters are iterations, rows, and none is called seed, so twicerun will not guess: "
        'if one of them seeds the step, write seed="<that name>"; otherwise add '
        '`seed: int = 20260101` and write seed="seed"'
    )


def test_stochastic_without_a_seed_and_no_integer_parameter_says_what_to_add():
    def sample(ctx):
        pass

    assert refusal(step(stochastic=True), sample) == (
        "@step(stochastic=True) on sample does not say which parameter seeds it, and it has "
        "no integer parameter to name: add one, as in `def sample(ctx, seed: int = 20260101)`, "
        'and write @step(stochastic=True, seed="seed")'
    )


def test_a_seed_naming_no_parameter_lists_the_parameters_and_the_close_match():
    def sample(ctx, seed: int = 7):
        pass

    assert refusal(step(stochastic=True, seed="sed"), sample) == (
        '@step(seed="sed") on sample names no parameter; its parameters after ctx are seed; '
        'did you mean seed="seed"?'
    )


def test_a_seed_naming_no_parameter_of_a_ctx_only_step_says_to_add_it():
    def sample(ctx):
        pass

    assert refusal(step(stochastic=True, seed="seed"), sample) == (
        '@step(seed="seed") on sample names no parameter: sample takes only ctx; '
        "add `seed: int = 20260101` to its signature"
    )


def test_a_seed_parameter_without_a_default_is_refused():
    def sample(ctx, seed: int):
        pass

    assert refusal(step(stochastic=True, seed="seed"), sample) == (
        "the seed parameter seed of sample has no default; give it one, as in "
        "`seed: int = 20260101`, so every run holds the same value"
    )


def test_a_seed_parameter_that_is_not_an_integer_is_refused():
    def sample(ctx, seed=0.5):
        pass

    assert refusal(step(stochastic=True, seed="seed"), sample) == (
        "the seed parameter seed of sample defaults to 0.5 (float); a seed is an integer: "
        "write `seed: int = 20260101`"
    )


def test_a_seed_parameter_annotated_as_another_type_is_refused():
    def sample(ctx, seed: str = 3):  # type: ignore[assignment]
        pass

    assert refusal(step(stochastic=True, seed="seed"), sample) == (
        "the seed parameter seed of sample is annotated str; a seed is an integer: "
        "write `seed: int = 20260101`"
    )


def test_a_boolean_default_is_not_an_integer_seed():
    def sample(ctx, seed=True):
        pass

    assert "defaults to True (bool); a seed is an integer" in refusal(
        step(stochastic=True, seed="seed"), sample
    )


def test_a_seed_without_stochastic_is_refused():
    def sample(ctx, seed: int = 7):
        pass

    assert refusal(step(seed="seed"), sample) == (
        '@step(seed="seed") on sample names a seed without stochastic=True; write '
        '@step(stochastic=True, seed="seed") if the step draws on randomness, '
        "or drop seed= if it does not"
    )


def test_var_positional_parameters_are_refused():
    def sample(ctx, *rest):
        pass

    assert refusal(step, sample) == (
        "step sample takes *rest, and twicerun calls a step with named parameters only: "
        "replace *rest with the parameters it stands for"
    )


def test_a_seed_given_as_a_value_is_told_to_name_the_parameter():
    def sample(ctx, seed: int = 7):
        pass

    assert refusal(step(stochastic=True, seed=42), sample) == (
        "@step(seed=42) on sample: seed= takes the name of the parameter that seeds the step, "
        "not its value; write seed='seed' and give that parameter the default 42"
    )


def test_stochastic_must_be_a_boolean():
    def sample(ctx, seed: int = 7):
        pass

    assert refusal(step(stochastic="yes", seed="seed"), sample) == (
        "@step(stochastic='yes') on sample: stochastic is True or False"
    )


def test_string_annotations_from_future_import_are_understood():
    namespace: dict = {}
    exec(
        "from __future__ import annotations\n"
        "from twicerun import step\n"
        "@step(stochastic=True, seed='seed')\n"
        "def sample(ctx, seed: int = 9):\n"
        "    pass\n",
        namespace,
    )
    assert declaration_of(namespace["sample"]).seed == "seed"
