"""The gate's words: how a step on a pull request compares with the baseline.

A vocabulary of its own, beside the loop's statuses (which say what one invocation
measured) and never merged with them: a step can be `DIVERGENT` and `unchanged`
at once, when it diverged just as often on the baseline.
"""

from __future__ import annotations

NEW = "new divergence"
RATE_UP = "rate up"
# A step whose runs differed on the baseline too, where rows now go missing, extra or
# repeated (or the schema changes) and on the baseline they did not, or did in fewer
# trials: its answers cannot spread further than "every run differs", so only the kind of
# difference can show that a step that drifted on main now also loses rows.
NEW_KIND = "new kind of difference"
ROWS_UP = "rows differ more often"
# A step whose runs differed on the baseline too, where re-executed at one thread they
# now differ as well, or do in more trials: a float sum that drifted by thread order on
# main and now also draws random() is as spread out as before, and only its cause shows
# the change.
NEW_CAUSE = "differs at one thread now"
ONE_THREAD_UP = "differs at one thread more often"
# A step whose floats drifted on the baseline too, by no more than adding the same terms in
# another order can move a sum, where now they move further (or to NULL or NaN), or do in
# more trials: a float sum that became first() over the same groups spreads no further and
# loses no rows, and only how far its values moved shows the change.
NEW_REACH = "drifts past the bound now"
REACH_UP = "drifts past the bound more often"
FIXED = "fixed"
RATE_DOWN = "rate down"
UNCHANGED = "unchanged"
NOT_CONFIRMED = "suspect, not confirmed"
NO_BASELINE = "no baseline"

STEP_ADDED = "not comparable: step added"
STEP_REMOVED = "not comparable: step removed"
STEP_RENAMED = "not comparable: step renamed"
PIPELINE_ADDED = "not comparable: pipeline not in the baseline"
PIPELINE_MISSING = "not comparable: pipeline not run"
MEASURED_OTHERWISE = "not comparable: measured otherwise"
# The step ran and wrote nothing any run could be compared on, where the baseline
# compared it: a step that stopped writing must not pass as `unchanged`.
NOTHING_COMPARED = "not comparable: nothing compared now"
# An amplifier could not run on the step now, where on the baseline every one that
# applied did: the stress the baseline measured was not applied, so a quiet loop alone
# must not pass as `unchanged`.
AMPLIFIER_FAILED = "not comparable: an amplifier failed now"

# The pipeline did not finish on the pull request: a step raised, its file would not
# load, or a step used ctx in a way the contract refuses. Nothing was measured to
# compare, and no fail-on setting lets it pass: the check fails (exit 3 or 2).
DID_NOT_FINISH = "did not finish"

NOT_COMPARABLE = (
    STEP_ADDED,
    STEP_REMOVED,
    STEP_RENAMED,
    PIPELINE_ADDED,
    PIPELINE_MISSING,
    MEASURED_OTHERWISE,
    NOTHING_COMPARED,
    AMPLIFIER_FAILED,
)
# Verdicts of a step's per-trial 0/1 statistics rather than its score (github/gate.KINDS).
OF_A_KIND = (NEW_KIND, ROWS_UP, NEW_CAUSE, ONE_THREAD_UP, NEW_REACH, REACH_UP)
WORSE = (NEW, RATE_UP, *OF_A_KIND)
BETTER = (FIXED, RATE_DOWN)

# `fail-on` words and the verdicts each turns into a failed check; `stable` is
# decided on statuses (a step newly STABLE_ON_THIS_INPUT), in gate.is_regression.
FAIL_ON = {
    "new": (NEW, NEW_KIND, NEW_CAUSE, NEW_REACH),
    "rate-up": (RATE_UP, ROWS_UP, ONE_THREAD_UP, REACH_UP),
    "stable": (),
    "not-comparable": NOT_COMPARABLE,
}
DEFAULT_FAIL_ON = ("new", "rate-up", "not-comparable")

BASE_BRANCH = "base branch"
PULL_REQUEST = "pull request"
WORKING_TREE = "working tree"

# What the checked code is, for the sentence that says it edited its own baseline: a
# pull request's run, a merge queue's group (GitHub names no base branch there), or a
# checkout compared with an explicit --baseline-ref.
CHANGED_BY_PULL_REQUEST = "pull request"
CHANGED_BY_MERGE_GROUP = "merge group"
CHANGED_BY_CHECKOUT = "checkout"
CHANGED_BY = (CHANGED_BY_PULL_REQUEST, CHANGED_BY_MERGE_GROUP, CHANGED_BY_CHECKOUT)
