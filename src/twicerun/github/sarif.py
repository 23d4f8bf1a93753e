"""The gate as SARIF 2.1.0, for GitHub code scanning.

Annotations stop at ten per severity; a code-scanning alert does not, and it stays
on the step's `def` line until the step is fixed. One rule per divergence class
and cause (`twicerun/VALUE_DRIFT/PARALLEL_ORDER`), one result per step that got
worse (error) or diverged (warning), located where the step is defined.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
from collections.abc import Sequence
from typing import Any

from twicerun._version import __version__
from twicerun.vocabulary import gate as words
from twicerun.vocabulary.loop import Status

SCHEMA_URI = "https://json.schemastore.org/sarif-2.1.0.json"


def _rule_id(classes: Sequence[str], cause: str | None, verdict: str) -> str:
    what = "+".join(classes) or verdict.replace(" ", "_").upper()
    return f"twicerun/{what}/{cause or 'NO_CAUSE'}"


def sarif(gate: Any, working_directory: str = ".") -> dict[str, Any]:
    """The SARIF log of `gate` (a twicerun.github.gate.Gate); paths from the repository root."""
    rules: dict[str, dict[str, Any]] = {}
    results = []
    for d in gate.decisions:
        worse = d in gate.regressions
        if not worse and d.status not in (Status.DIVERGENT, Status.STABLE_ON_THIS_INPUT):
            continue
        rule = _rule_id(d.classes, d.cause, d.verdict)
        unfinished = d.verdict == words.DID_NOT_FINISH
        described = (
            "A pipeline did not finish: a step raised, or the file or a use of ctx was refused"
            if unfinished
            else f"A step's answer changed between runs: {' '.join(d.classes) or d.verdict}"
            + (f", cause {d.cause}" if d.cause else "")
        )
        rules.setdefault(
            rule,
            {
                "id": rule,
                "name": rule.replace("/", "_"),
                "shortDescription": {"text": described},
                "helpUri": "https://github.com/twicerun/action/blob/main/docs/action.md",
            },
        )
        now = f"{d.now_fired} of {d.now_compared}" if d.now_compared is not None else "not run"
        text = f"{d.name} in {d.pipeline}: {d.verdict}, {now} comparisons differed"
        if unfinished or (d.verdict in words.OF_A_KIND and d.evidence):
            # Its comparisons are no news (it differed on the baseline too); what changed is.
            text = f"{d.name} in {d.pipeline}: {d.verdict}: {d.evidence[0].splitlines()[0]}"
        if d.status:
            text += f"; status {d.status}"
        location = posixpath.normpath(posixpath.join(working_directory, d.file or d.pipeline))
        results.append(
            {
                "ruleId": rule,
                "level": "error" if worse else "warning",
                "message": {"text": text},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": location},
                            "region": {"startLine": max(1, d.line or 1)},
                        }
                    }
                ],
                # The same step under the same rule is the same alert from run to run.
                "partialFingerprints": {
                    "twicerun/v1": hashlib.sha256(
                        f"{d.pipeline}\0{d.name}\0{rule}".encode()
                    ).hexdigest()
                },
            }
        )
    return {
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "twicerun",
                        "version": __version__,
                        "informationUri": "https://github.com/twicerun/action",
                        "rules": list(rules.values()),
                    }
                },
                "results": results,
            }
        ],
    }


def sarif_json(gate: Any, working_directory: str = ".") -> str:
    return json.dumps(sarif(gate, working_directory), indent=2) + "\n"
