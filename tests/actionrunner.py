"""Runs a composite action's steps the way a GitHub runner does, for an end-to-end test.

`uses:` steps (setup-python, cache) need GitHub and are skipped: the test
provides a warm cache, and setup-python's outputs name the interpreter running
the tests (a `python3` found on PATH may be another minor version, for which the
test's wheelhouse holds no wheels). Every `run:` step is executed with
`bash --noprofile --norc -eo pipefail`, with its `env:` and `working-directory:`
expressions evaluated, fresh GITHUB_OUTPUT and GITHUB_PATH files, and the
runner's own variables; its outputs are read back for later steps and for the
action's outputs. Expressions are evaluated only where GitHub evaluates them,
and a `run:` script containing one fails the run, since the action promises
never to splice an input into shell code.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from dataclasses import dataclass, field
from pathlib import Path

import yaml

EXPRESSION = re.compile(r"\$\{\{\s*(.*?)\s*\}\}")


@dataclass
class StepRun:
    name: str
    skipped: bool
    code: int = 0
    stdout: str = ""
    stderr: str = ""
    outputs: dict[str, str] = field(default_factory=dict)


@dataclass
class ActionRun:
    steps: list[StepRun]
    outputs: dict[str, str]

    @property
    def stdout(self) -> str:
        return "".join(s.stdout for s in self.steps)


def read_outputs(path: Path) -> dict[str, str]:
    outputs: dict[str, str] = {}
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    i = 0
    while i < len(lines):
        line = lines[i]
        if "<<" in line and "=" not in line.split("<<", 1)[0]:
            name, delimiter = line.split("<<", 1)
            value = []
            i += 1
            while lines[i] != delimiter:
                value.append(lines[i])
                i += 1
            outputs[name] = "\n".join(value)
        elif "=" in line:
            name, value = line.split("=", 1)
            outputs[name] = value
        i += 1
    return outputs


def run_action(
    action: Path,
    *,
    inputs: dict[str, str],
    workspace: Path,
    runner_temp: Path,
    env: dict[str, str],
    runner_os: str = "Linux",
) -> ActionRun:
    spec = yaml.safe_load(action.read_text())
    event_path = env.get("GITHUB_EVENT_PATH")
    event = json.loads(Path(event_path).read_text()) if event_path else {}
    context = {
        "inputs": {
            name: str(item.get("default", "")) for name, item in spec.get("inputs", {}).items()
        },
        "github": {
            "action_path": str(action.parent),
            "token": env.get("GITHUB_TOKEN", ""),
            "workspace": str(workspace),
            "base_ref": env.get("GITHUB_BASE_REF", ""),
            "event_name": env.get("GITHUB_EVENT_NAME", ""),
            "event": event,
        },
        "runner": {"temp": str(runner_temp), "os": runner_os, "arch": "X64"},
        # What actions/setup-python would have reported, for the interpreter at hand.
        "steps": {
            "python": {
                "outputs": {
                    "python-path": sys.executable,
                    "python-version": ".".join(map(str, sys.version_info[:3])),
                }
            }
        },
    }
    context["inputs"].update(inputs)

    def lookup(expression: str) -> str:
        if "||" in expression:
            # `cond && value || fallback`, GitHub's conditional, the one form the action uses.
            chosen, fallback = expression.rsplit("||", 1)
            test, value = chosen.rsplit("&&", 1)
            picked = operand(value) if condition(test) else ""
            return picked or operand(fallback)
        if expression.startswith("format("):
            template, *args = [a.strip() for a in expression[len("format(") : -1].split(",")]
            return operand(template).format(*(operand(a) for a in args))
        value: object = context
        for part in expression.split("."):
            value = value.get(part, "") if isinstance(value, dict) else ""
        return str(value)

    def evaluate(text: str) -> str:
        return EXPRESSION.sub(lambda m: lookup(m.group(1)), str(text))

    def operand(text: str) -> str:
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] == "'":
            return text[1:-1]
        return lookup(text)

    def condition(text: str) -> bool:
        """The `if:` forms the action uses: comparisons joined by &&."""
        for clause in str(text).split("&&"):
            for op in ("!=", "=="):
                if op in clause:
                    left, right = clause.split(op)
                    if (operand(left) == operand(right)) != (op == "=="):
                        return False
                    break
            else:
                raise AssertionError(f"the test runner cannot evaluate if: {text}")
        return True

    # Defaults may themselves be expressions (github-token: ${{ github.token }}).
    context["inputs"] = {k: evaluate(v) for k, v in context["inputs"].items()}
    runs = []
    for number, step in enumerate(spec["runs"]["steps"]):
        name = step.get("name", f"step {number}")
        if "uses" in step or ("if" in step and not condition(step["if"])):
            runs.append(StepRun(name, skipped=True))
            continue
        script = step["run"]
        if EXPRESSION.search(script):
            raise AssertionError(
                f"{name}: an expression inside run: would be spliced into the script"
            )
        output_file = runner_temp / f"output-{uuid.uuid4().hex}"
        path_file = runner_temp / f"path-{uuid.uuid4().hex}"
        output_file.touch()
        path_file.touch()
        step_env = {
            **env,
            "GITHUB_OUTPUT": str(output_file),
            "GITHUB_PATH": str(path_file),
            "GITHUB_ACTION_PATH": str(action.parent),
            "GITHUB_WORKSPACE": str(workspace),
            "RUNNER_TEMP": str(runner_temp),
            **{k: evaluate(v) for k, v in (step.get("env") or {}).items()},
        }
        cwd = workspace / evaluate(step.get("working-directory", "."))
        script_file = runner_temp / f"script-{uuid.uuid4().hex}.sh"
        script_file.write_text(script)
        done = subprocess.run(
            ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script_file)],
            cwd=cwd,
            env=step_env,
            capture_output=True,
            text=True,
            check=False,
        )
        outputs = read_outputs(output_file)
        if step.get("id"):
            context["steps"][step["id"]] = {"outputs": outputs}
        runs.append(StepRun(name, False, done.returncode, done.stdout, done.stderr, outputs))
        if done.returncode != 0:
            break  # the runner stops a composite action at its first failing step
    action_outputs = {
        name: evaluate(item["value"]) for name, item in spec.get("outputs", {}).items()
    }
    return ActionRun(runs, action_outputs)


def base_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "SYSTEMROOT")
    # Every step of a real runner sees GITHUB_ACTIONS=true.
    return {**{k: v for k, v in os.environ.items() if k in keep}, "GITHUB_ACTIONS": "true"}
