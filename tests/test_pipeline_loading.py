"""Finding a pipeline's steps both ways the contract allows, and refusing what it refuses."""

from __future__ import annotations

import sys

import pytest

from twicerun.errors import InvalidStep, PipelineError, UsageError
from twicerun.pipeline import load_pipeline
from twicerun.pipeline.outline import shows_steps


def test_steps_are_top_level_functions_taking_ctx_in_source_order(write_pipeline):
    path = write_pipeline(
        """
        from os.path import join  # imported: never a step

        def zeta(ctx):
            pass

        def helper(x):
            return x

        def alpha(ctx, n: int = 3):
            def inner(ctx):
                pass

        class NotAStep:
            def method(ctx):
                pass

        def context_under_another_name(c):
            pass
        """
    )
    pipeline = load_pipeline(path)
    assert [s.name for s in pipeline.steps] == ["zeta", "alpha"]
    assert [s.index for s in pipeline.steps] == [0, 1]
    assert pipeline.discovered_by == "functions"


def test_functions_imported_into_the_file_are_not_steps(write_pipeline):
    write_pipeline("def shared(ctx):\n    pass\n", name="shared_steps.py")
    path = write_pipeline(
        """
        from shared_steps import shared

        def own(ctx):
            pass
        """
    )
    assert [s.name for s in load_pipeline(path).steps] == ["own"]


def test_a_steps_list_wins_and_sets_the_order(write_pipeline):
    path = write_pipeline(
        """
        def first(ctx):
            pass

        def second(ctx):
            pass

        def unlisted(ctx):
            pass

        STEPS = [second, first]
        """
    )
    pipeline = load_pipeline(path)
    assert [s.name for s in pipeline.steps] == ["second", "first"]
    assert pipeline.discovered_by == "STEPS"


def test_a_steps_list_may_hold_functions_imported_from_elsewhere(write_pipeline):
    write_pipeline("def shared(ctx):\n    pass\n", name="library.py")
    path = write_pipeline(
        """
        from library import shared

        def own(ctx):
            pass

        STEPS = [shared, own]
        """
    )
    assert [s.name for s in load_pipeline(path).steps] == ["shared", "own"]


def test_the_line_of_a_step_is_its_def_line_below_any_decorator(write_pipeline):
    path = write_pipeline(
        """
        from twicerun import step


        @step
        def decorated(ctx):
            pass


        def plain(ctx):
            pass
        """
    )
    steps = load_pipeline(path).steps
    assert [(s.name, s.line) for s in steps] == [("decorated", 5), ("plain", 9)]


def test_the_same_file_gives_the_same_steps_every_time(write_pipeline):
    path = write_pipeline("def b(ctx):\n    pass\n\ndef a(ctx):\n    pass\n")
    first = load_pipeline(path)
    second = load_pipeline(path)
    assert [s.name for s in first.steps] == [s.name for s in second.steps] == ["b", "a"]
    assert first.digest == second.digest


BOUND = """
import functools


def scaled(ctx, factor=1):
    pass


class Doubler:
    def __init__(self, by):
        self.by = by

    def __call__(self, ctx):
        pass


STEPS = [functools.partial(scaled, factor=2), Doubler(2)]
"""


def test_a_partial_or_a_callable_object_has_a_line_and_a_code_digest_that_follows_its_code(
    write_pipeline,
):
    # Without a digest, reproduce could never check these steps, and said the receipt
    # came from an older twicerun.
    path = write_pipeline(BOUND)
    first, second = load_pipeline(path), load_pipeline(path)
    assert [(s.line, s.file) for s in first.steps] == [(4, str(path)), (12, str(path))]
    digests = [s.code_digest for s in first.steps]
    assert all(digests) and digests == [s.code_digest for s in second.steps]

    def digests_after(source):
        path.write_text(source)
        return [s.code_digest for s in load_pipeline(path).steps]

    bound = BOUND.replace("factor=2)", "factor=3)").replace("Doubler(2)", "Doubler(3)")
    changed = digests_after(bound)
    assert changed[0] != digests[0] and changed[1] != digests[1]
    body = digests_after(BOUND.replace("        pass\n\n\nSTEPS", "        return None\n\n\nSTEPS"))
    assert body[0] == digests[0] and body[1] != digests[1]


def test_a_partial_or_a_callable_object_is_named_after_what_it_binds(write_pipeline):
    # They have no __name__, and were reported as step_1, step_2: nothing a reader wrote.
    path = write_pipeline(BOUND)
    assert [s.name for s in load_pipeline(path).steps] == ["scaled", "Doubler"]
    path.write_text(
        BOUND.replace(
            "STEPS = [functools.partial(scaled, factor=2), Doubler(2)]",
            "STEPS = [scaled, functools.partial(scaled, factor=2), "
            "functools.partial(functools.partial(scaled), factor=3), Doubler(2), Doubler(3)]",
        )
    )
    # Where the name is taken, by the function itself or another binding of it, the
    # position tells them apart, so one function can be several steps.
    assert [s.name for s in load_pipeline(path).steps] == [
        "scaled",
        "scaled_1",
        "scaled_2",
        "Doubler_3",
        "Doubler_4",
    ]


def test_a_seeded_step_gets_its_default_unless_overridden(write_pipeline):
    path = write_pipeline(
        """
        from twicerun import step

        @step(stochastic=True, seed="seed")
        def sample(ctx, seed: int = 11):
            pass
        """
    )
    assert load_pipeline(path).steps[0].seed_value == 11
    assert load_pipeline(path, {"sample": 5}).steps[0].seed_value == 5


def test_a_seed_override_naming_no_seeded_step_is_refused(write_pipeline):
    path = write_pipeline("def plain(ctx):\n    pass\n")
    with pytest.raises(UsageError) as info:
        load_pipeline(path, {"plain": 5})
    assert str(info.value) == (
        f"--seed names plain, which is no step of {path} that declares a seed; "
        f"seeded steps here: none"
    )


def test_a_declaration_refused_at_import_names_the_file_and_line(write_pipeline):
    path = write_pipeline(
        """
        from twicerun import step

        @step(seed="seed")
        def sample(ctx, seed: int = 3):
            pass
        """
    )
    with pytest.raises(InvalidStep) as info:
        load_pipeline(path)
    assert str(info.value).startswith(f'{path}:3: @step(seed="seed") on sample names a seed')


@pytest.mark.parametrize(
    ("source", "message"),
    [
        (
            "X = 1\n",
            "{path} defines no steps: define top-level functions whose first parameter "
            "is `ctx`, or a list STEPS of step functions",
        ),
        (
            # The likeliest reason a file of functions has no steps is the parameter's name.
            "def load(context):\n    pass\n\n\ndef save(c, n=1):\n    pass\n\n\n"
            "def _helper(x):\n    pass\n",
            "{path} defines no steps: define top-level functions whose first parameter "
            "is `ctx`, or a list STEPS of step functions (load(context) and save(c) take a "
            "first parameter of another name; steps are found by the name ctx)",
        ),
        (
            # It used to get the sentence above, which asks for what the file already has.
            "def load(ctx):\n    pass\n\n\nSTEPS = []\n",
            "STEPS in {path} is empty, so it defines no steps: list the step functions in "
            "it, or remove it, and every top-level function whose first parameter is `ctx` "
            "is a step",
        ),
        ("STEPS = 'abc'\n", "STEPS in {path} is a str; make it a list of step functions"),
        (
            "STEPS = [1]\n",
            "STEPS in {path} holds 1 (int) at position 0; every entry must be a step function",
        ),
        (
            "def a(ctx):\n    pass\nSTEPS = [a, a]\n",
            "STEPS in {path} lists a at positions 0 and "
            "1; a step name must be unique, since reports and artifacts are filed under it",
        ),
        (
            "def a(ctx, n):\n    pass\n",
            "step a has a parameter n with no default; twicerun "
            "calls a step as a(ctx) plus a declared seed, so give n a default; or, if a is a "
            "helper the steps call, list the steps in STEPS = [...], since without it every "
            "top-level function whose first parameter is ctx is a step",
        ),
        (
            "def a(ctx, n):\n    pass\nSTEPS = [a]\n",
            "step a has a parameter n with no default; twicerun "
            "calls a step as a(ctx) plus a declared seed, so give n a default",
        ),
        (
            "async def a(ctx):\n    ctx.write('x', 'SELECT 1 AS v')\n",
            "step a is an async function (async def): twicerun calls it as a(ctx), which only "
            "makes a coroutine and runs none of its body, so it would write nothing; make it a "
            "plain def",
        ),
        (
            "def a(ctx):\n    yield ctx.write('x', 'SELECT 1 AS v')\n",
            "step a is a generator function (it has a yield): twicerun calls it as a(ctx), which "
            "only makes a generator and runs none of its body, so it would write nothing; make "
            "it a plain def",
        ),
        (
            "import no_such_module_here\n",
            "could not import {path}:1: ModuleNotFoundError: No module named 'no_such_module_here' "
            f"(twicerun runs the pipeline in {sys.executable}; install what the pipeline imports "
            f"there: {sys.executable} -m pip install no_such_module_here)",
        ),
        (
            "def a(ctx):\n    pass\nraise RuntimeError('setup failed')\n",
            "could not import {path}:3: RuntimeError: setup failed",
        ),
        ("def a(ctx)\n    pass\n", "could not import {path}: SyntaxError at line 1: expected ':'"),
        (
            "import sys\n\ndef a(ctx):\n    pass\n\nsys.exit(0)\n",
            "could not import {path}:6: it called sys.exit(0) while being imported; twicerun "
            "imports a pipeline rather than running it as a script, so put what should run only "
            'as a script under `if __name__ == "__main__":`',
        ),
        (
            "raise SystemExit\n",
            "could not import {path}:1: it called sys.exit() while being imported; twicerun "
            "imports a pipeline rather than running it as a script, so put what should run only "
            'as a script under `if __name__ == "__main__":`',
        ),
    ],
)
def test_a_pipeline_the_contract_refuses_gets_one_sentence(write_pipeline, source, message):
    path = write_pipeline(source)
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert str(info.value) == message.format(path=path)


def test_a_missing_file_is_named_with_the_python_files_beside_it(tmp_path):
    (tmp_path / "reference.py").write_text("")
    missing = tmp_path / "refrence.py"
    with pytest.raises(PipelineError) as info:
        load_pipeline(missing)
    assert str(info.value) == (
        f"pipeline file {missing} does not exist (Python files in {tmp_path}: reference.py)"
    )


def test_a_directory_is_not_a_pipeline(tmp_path):
    with pytest.raises(PipelineError) as info:
        load_pipeline(tmp_path)
    assert str(info.value) == f"{tmp_path} is a directory; pass the pipeline's Python file"
    # With Python files in it, they are named, as beside a file that does not exist.
    (tmp_path / "daily.py").write_text("")
    (tmp_path / "backfill.py").write_text("")
    with pytest.raises(PipelineError) as info:
        load_pipeline(tmp_path)
    assert str(info.value) == (
        f"{tmp_path} is a directory; pass the pipeline's Python file "
        f"(Python files in {tmp_path}: backfill.py, daily.py)"
    )


PIPELINE_WITH_A_HELPER = """
from helpers import QUERY


def load(ctx):
    ctx.write("t", QUERY)


def later(ctx):
    import helpers  # inside the body: resolved when the step runs, not at import

    ctx.write("u", helpers.QUERY)
"""


def test_each_pipeline_imports_its_own_helper_module(tmp_path, twicerun, run_dir, monkeypatch):
    """Two pipelines in one process (the gate, `baseline update`) each beside a helpers.py:
    the second used to get the first's module from sys.modules and run its SQL, and a step
    importing its helper inside its body raised ModuleNotFoundError."""
    import sys

    import pyarrow.parquet as pq

    for team, rows in [("sales", 3), ("stock", 7)]:
        (tmp_path / team).mkdir()
        (tmp_path / team / "helpers.py").write_text(
            f"QUERY = \"SELECT '{team}' AS team, range AS v FROM range({rows})\"\n"
        )
        (tmp_path / team / "pipeline.py").write_text(PIPELINE_WITH_A_HELPER)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # not the pipelines' directory, as in a workflow
    for team, rows in [("sales", 3), ("stock", 7)]:
        outcome = twicerun("run", tmp_path / team / "pipeline.py", "--runs", "2", "--keep", "0")
        assert outcome.code == 0, outcome.err
        newest = sorted(run_dir.iterdir(), key=lambda p: p.stat().st_mtime)[-1]
        for step in ("00-load/t.parquet", "01-later/u.parquet"):
            table = pq.read_table(newest / "loop" / "1" / step).to_pylist()
            assert {r["team"] for r in table} == {team} and len(table) == rows, step
    # A helper imported only inside a step's body, from a directory that is not the
    # working directory: found as `python pipeline.py` finds it.
    (tmp_path / "lazy").mkdir()
    (tmp_path / "lazy" / "only_here.py").write_text("QUERY = 'SELECT 1 AS v'\n")
    (tmp_path / "lazy" / "pipeline.py").write_text(
        "def step(ctx):\n    import only_here\n\n    ctx.write('t', only_here.QUERY)\n"
    )
    outcome = twicerun("run", tmp_path / "lazy" / "pipeline.py", "--runs", "2")
    assert outcome.code == 0, outcome.err
    # Nothing of any pipeline's directory is left behind for the next one.
    assert "helpers" not in sys.modules and "only_here" not in sys.modules
    assert str(tmp_path / "stock") not in sys.path


def test_a_pipeline_inside_a_package_imports_from_it_as_python_m_would(
    tmp_path, twicerun, run_dir, monkeypatch
):
    """`etl/daily.py` beside `etl/__init__.py` and `etl/common.py`: both `from etl.common
    import ...` and `from .common import ...` raised ModuleNotFoundError (or "no known
    parent package"), and the advice was to pip install etl, someone else's package."""
    import sys

    import pyarrow.parquet as pq

    package = tmp_path / "repo" / "etl"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "common.py").write_text("QUERY = 'SELECT 42 AS answer'\n")
    (package / "absolute.py").write_text(
        "from etl.common import QUERY\n\ndef load(ctx):\n    ctx.write('t', QUERY)\n"
    )
    (package / "relative.py").write_text(
        "from .common import QUERY\n\ndef load(ctx):\n    ctx.write('t', QUERY)\n"
    )
    monkeypatch.chdir(tmp_path)  # neither the package nor its root
    for name in ("absolute", "relative"):
        outcome = twicerun("run", package / f"{name}.py", "--runs", "2", "--keep", "0")
        assert outcome.code == 0, outcome.err
        newest = sorted(run_dir.iterdir(), key=lambda p: p.stat().st_mtime)[-1]
        assert pq.read_table(newest / "loop" / "1" / "00-load" / "t.parquet").to_pylist() == [
            {"answer": 42}
        ]
        # The package's module is part of the step's code, as a helper beside it is.
        receipt = (newest / "loop" / "1" / "00-load" / "receipt.json").read_text()
        assert '"common.py"' in receipt
    assert "etl" not in sys.modules and "etl.common" not in sys.modules
    assert str(tmp_path / "repo") not in sys.path


def test_a_teams_own_module_out_of_pythons_reach_is_not_sent_to_pip(
    tmp_path, twicerun, monkeypatch
):
    """`pipelines/daily.py` importing the repository's `mylib/` was told to run
    `pip install mylib`, which installs whatever a stranger published under that name."""
    (tmp_path / "mylib").mkdir()
    (tmp_path / "mylib" / "__init__.py").write_text("")
    (tmp_path / "pipelines").mkdir()
    path = tmp_path / "pipelines" / "daily.py"
    path.write_text("import mylib\n\ndef a(ctx):\n    ctx.write('t', 'SELECT 1 AS v')\n")
    monkeypatch.chdir(tmp_path)
    outcome = twicerun("run", "pipelines/daily.py")
    assert outcome.code == 2
    assert outcome.err == (
        "twicerun: could not import pipelines/daily.py:1: ModuleNotFoundError: No module named "
        "'mylib' (mylib is in the working directory, which Python does not search when it "
        "imports the pipeline; put it on the path (PYTHONPATH=.) or install the project "
        "that holds it (pip install -e))\n"
    )
    # A module missing inside a package Python did find: neither advice would help.
    (tmp_path / "pipelines" / "mylib").mkdir()
    (tmp_path / "pipelines" / "mylib" / "__init__.py").write_text("")
    path.write_text("import mylib.absent\n\ndef a(ctx):\n    ctx.write('t', 'SELECT 1 AS v')\n")
    outcome = twicerun("run", "pipelines/daily.py")
    assert outcome.err == (
        "twicerun: could not import pipelines/daily.py:1: ModuleNotFoundError: No module named "
        "'mylib.absent'\n"
    )
    (tmp_path / "pipelines" / "mylib" / "__init__.py").unlink()
    (tmp_path / "pipelines" / "mylib").rmdir()
    path.write_text("import mylib\n\ndef a(ctx):\n    ctx.write('t', 'SELECT 1 AS v')\n")
    # The same from a src/ layout, which packaging guides teach.
    (tmp_path / "src").mkdir()
    (tmp_path / "mylib").rename(tmp_path / "src" / "mylib")
    outcome = twicerun("run", "pipelines/daily.py")
    assert "(mylib is in src, which Python does not search" in outcome.err
    assert "PYTHONPATH=src)" in outcome.err


def test_a_file_that_is_not_python_says_a_pipeline_is_a_python_file(tmp_path):
    """`twicerun run README.md` said only that line 10 had an unterminated string."""
    notes = tmp_path / "README.md"
    notes.write_text("# Our pipelines\n\nRun them with `twicerun run pipelines/daily.py`.\n")
    (tmp_path / "daily.py").write_text("def a(ctx):\n    pass\n")
    with pytest.raises(PipelineError) as raised:
        load_pipeline(notes)
    assert str(raised.value).endswith(
        "; a pipeline is a Python file, and this one does not end in .py "
        f"(Python files in {tmp_path}: daily.py)"
    )


@pytest.mark.parametrize(
    ("source", "shown"),
    [
        ("def load(ctx):\n    pass\n", True),
        ("async def load(ctx, seed):\n    pass\n", True),
        ("try:\n    import x\nexcept ImportError:\n    def load(ctx):\n        pass\n", True),
        ("def one(ctx):\n    pass\n\n\nSTEPS: list = [one]\n", True),
        ("STEPS = []\n", True),
        ('QUERY = "SELECT 1"\n\n\ndef fmt(value):\n    return value\n', False),
        ("class Loader:\n    def load(ctx):\n        pass\n", False),
        ("def outer(x):\n    def inner(ctx):\n        pass\n", False),
        ("from helpers import load\n", False),
        ("", False),
        ("def broken(ctx:\n", None),
    ],
)
def test_a_files_source_says_whether_it_shows_steps_without_importing_it(tmp_path, source, shown):
    path = tmp_path / "candidate.py"
    # Importing it would fail loudly: the answer comes from the source alone.
    path.write_text("raise SystemExit('imported')\n" + source if shown is not None else source)
    assert shows_steps(path) is shown


def test_a_pipeline_that_exits_as_it_is_imported_never_ends_twicerun_with_its_status(
    write_pipeline, twicerun
):
    """sys.exit(0) at a pipeline's top level ended twicerun with exit 0 and printed nothing:
    a run, or a required check, read as green with no step executed."""
    path = write_pipeline("import sys\n\ndef a(ctx):\n    pass\n\nsys.exit(0)\n")
    outcome = twicerun("run", path, "--runs", "2")
    assert outcome.code == 2
    assert outcome.err.startswith(f"twicerun: could not import {path}:6: it called sys.exit(0)")


def test_a_pipeline_sees_the_arguments_of_a_plain_run_as_it_is_imported(write_pipeline, twicerun):
    """A file written to be run as `python pipeline.py` may parse its arguments at import;
    it saw twicerun's (`run pipeline.py --runs 2`), and argparse refused them in a usage line
    that read like twicerun's own. It sees its own path and nothing else, and twicerun's
    arguments are back once it is imported."""
    import sys

    before = list(sys.argv)
    path = write_pipeline(
        """
        import argparse
        import sys

        SEEN = list(sys.argv)
        args = argparse.ArgumentParser().parse_args()

        def a(ctx):
            ctx.write("seen", f"SELECT {len(SEEN)} AS n, '{SEEN[0]}' AS first")
        """
    )
    outcome = twicerun("run", path, "--runs", "2", "--json", "-")
    assert outcome.code == 0, outcome.err
    assert sys.argv == before
    loaded = load_pipeline(path)
    assert loaded.steps[0].fn.__globals__["SEEN"] == [str(path)]


def test_a_syntax_error_in_a_module_the_pipeline_imports_names_that_module(tmp_path):
    """The line was that module's and the file named was the pipeline's."""
    (tmp_path / "helper_broken.py").write_text("def f(:\n")
    path = tmp_path / "p.py"
    path.write_text("import helper_broken\n\ndef a(ctx):\n    pass\n")
    with pytest.raises(PipelineError) as info:
        load_pipeline(path)
    assert str(info.value).startswith(f"could not import {path}: SyntaxError in ")
    assert "helper_broken.py at line 1: " in str(info.value)
