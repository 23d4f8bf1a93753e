"""Cause, amplification, statuses and every exit code, through the real CLI.

The pipelines here diverge on purpose and deterministically (a module counter,
a branch on ctx.threads, an order that depends on arrival), so every assertion
is exact; real thread-scheduling divergence is covered by the slow reference tests.
"""

from __future__ import annotations

import json
import os
import textwrap

import duckdb
import pytest
from conftest import FILLS_A_DICT

from twicerun.judge.cause import quiet_chance, upper_bound
from twicerun.result import Comparison
from twicerun.runner.bisect import enough


def by_name(document):
    return {s["name"]: s for s in document["steps"]}


INPUTS = """
def events(ctx):
    ctx.write("events", "SELECT range AS event_id, range % 50 AS customer FROM range(2000)")
"""

# Keeps the first event per customer with one thread and no tiebreak: deterministic for as
# long as the rows arrive in the same order, which rerunning never changes.
FIRST_PER_CUSTOMER = (
    INPUTS
    + """

def first_event(ctx):
    ctx.read("events")
    ctx.sql("SET threads = 1")
    ctx.write("firsts", "SELECT customer, first(event_id) AS event_id FROM events GROUP BY customer")
"""
)

FIRST_WITH_TIEBREAK = (
    INPUTS
    + """

def first_event(ctx):
    ctx.read("events")
    ctx.sql("SET threads = 1")
    ctx.write(
        "firsts",
        "SELECT customer, first(event_id ORDER BY event_id) AS event_id FROM events GROUP BY customer",
    )
"""
)


def test_first_row_per_key_without_a_tiebreak_is_stable_on_this_input(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(FIRST_PER_CUSTOMER), "--amplify", "--json", "-")
    step = by_name(outcome.json())["first_event"]
    assert (step["fired"], step["compared"]) == (0, 4)
    assert step["status"] == "STABLE_ON_THIS_INPUT"
    fired = {a["kind"]: a["fired"] for a in step["amplifiers"]}
    assert fired["arrival order"] > 0
    assert fired["thread count"] == fired["tie collapse"] == fired["row multiplication"] == 0
    assert outcome.code == 4


FIRST_PAYLOAD_OF_A_SMALL_INPUT = """
def events(ctx):
    ctx.write(
        "events",
        "SELECT range AS event_id, (range * 7) % 300 AS amount, range % 10 AS customer "
        "FROM range(300)",
    )

def first_amount(ctx):
    ctx.read("events")
    ctx.sql("SET threads = 1")
    ctx.write("firsts", "SELECT customer, first(amount) AS amount FROM events GROUP BY customer")
"""


def test_folding_a_column_does_not_hide_the_order_its_rows_arrive_in(write_pipeline, twicerun):
    """The joint probe collapsed ties in every row it read: on 300 rows, `amount` (as
    distinct as the id, but not kept) became one value, so the first amount per customer
    could not move however the rows arrived, and the step came out NO_DIVERGENCE_OBSERVED
    with arrival order reported as tried. The probe's first copy of the rows is now left
    as it was, and no column is folded into a single value."""
    outcome = twicerun(
        "run", write_pipeline(FIRST_PAYLOAD_OF_A_SMALL_INPUT), "--amplify", "--json", "-"
    )
    step = by_name(outcome.json())["first_amount"]
    assert (step["fired"], step["status"]) == (0, "STABLE_ON_THIS_INPUT"), step
    fired = {a["kind"]: a["fired"] for a in step["amplifiers"]}
    assert fired["arrival order"] > 0
    assert outcome.code == 4


# Keeps the first event seen per customer, merged into what earlier runs kept: the state's
# row comes first and stays, as it should; which of a new batch's events is first is up to
# the order they arrive in.
FIRST_SEEN_MERGED_INTO_STATE = (
    INPUTS
    + """

def first_seen(ctx):
    ctx.read("events")
    ctx.state("first_seen", "SELECT 0::BIGINT AS customer, 0::BIGINT AS event_id WHERE false")
    ctx.sql("SET threads = 1")
    ctx.write(
        "first_seen",
        "SELECT customer, first(event_id) AS event_id FROM ("
        "SELECT customer, event_id FROM first_seen "
        "UNION ALL SELECT customer, event_id FROM events) GROUP BY customer",
    )
"""
)


def test_a_step_merging_into_its_state_is_stressed_from_the_same_state_every_run(
    write_pipeline, twicerun
):
    """An amplifier's later runs read their run 1's output as state, as the loop's do, so a
    step that keeps what its state holds answered every stressed run with run 1's answer:
    reordering its input showed nothing, and a merge that depends on arrival order came out
    NO_DIVERGENCE_OBSERVED. Every run of an amplifier now starts from the state its run 1
    started from, so the input is the one thing that varies."""
    outcome = twicerun(
        "run", write_pipeline(FIRST_SEEN_MERGED_INTO_STATE), "--amplify", "--json", "-"
    )
    step = by_name(outcome.json())["first_seen"]
    assert (step["fired"], step["compared"]) == (0, 4)
    assert step["status"] == "STABLE_ON_THIS_INPUT", step
    fired = {a["kind"]: a["fired"] for a in step["amplifiers"]}
    assert fired["arrival order"] > 0
    assert fired["thread count"] == 0
    assert outcome.code == 4


RANKED_BY_A_SECOND_KEY = """
def customers(ctx):
    ctx.write(
        "customers",
        "SELECT range AS customer_id, 'user' || ((range * 7919) % 100003) || '@x.org' AS email, "
        "range % 5 AS region, md5('c' || range)::UUID AS token, "
        "unhex(md5('h' || range)) AS hash_key, "
        "TIME '06:00:00' + INTERVAL (range * 17) SECOND AS slot FROM range(3000)",
    )

def rank_by_email(ctx):
    ctx.read("customers")
    ctx.write("by_email", "SELECT customer_id, row_number() OVER (ORDER BY email) AS rk FROM customers")

def one_id_per_email(ctx):
    ctx.read("customers")
    ctx.write("ids", "SELECT email, any_value(customer_id) AS id FROM customers GROUP BY email")

def rank_by_token(ctx):
    ctx.read("customers")
    ctx.write("by_token", "SELECT customer_id, row_number() OVER (ORDER BY token) AS rk FROM customers")

def rank_by_hash_key(ctx):
    ctx.read("customers")
    ctx.write("by_hash", "SELECT customer_id, row_number() OVER (ORDER BY hash_key) AS rk FROM customers")

def rank_by_slot(ctx):
    ctx.read("customers")
    ctx.write("by_slot", "SELECT customer_id, row_number() OVER (ORDER BY slot) AS rk FROM customers")

def rank_by_region(ctx):
    ctx.read("customers")
    ctx.write("by_region", "SELECT customer_id, row_number() OVER (ORDER BY region) AS rk FROM customers")
"""


def test_a_sort_on_any_key_of_the_input_is_a_tiebreak_the_amplifiers_keep(write_pipeline, twicerun):
    """The email is a key as much as the id, which comes first and was the only column kept
    intact: tie collapse folded the email and row multiplication repeated it, so a rank by
    email and one id per email came out STABLE_ON_THIS_INPUT, both correct on any input
    whose emails are unique. A UUID key was repeated as it was by row multiplication, so a
    rank by it fired too, and so did one by a BLOB hash key (a Data Vault hub's), and one by
    a unique time of day (unseen82). A rank by region, which ties, still fires."""
    outcome = twicerun("run", write_pipeline(RANKED_BY_A_SECOND_KEY), "--amplify", "--json", "-")
    steps = by_name(outcome.json())
    for name in (
        "rank_by_email",
        "one_id_per_email",
        "rank_by_token",
        "rank_by_hash_key",
        "rank_by_slot",
    ):
        assert steps[name]["status"] == "NO_DIVERGENCE_OBSERVED", steps[name]
        assert all(a["fired"] == 0 for a in steps[name]["amplifiers"])
    assert steps["rank_by_region"]["status"] == "STABLE_ON_THIS_INPUT"
    assert outcome.code == 4


KEYED_BY_A_MONTH = """
def land(ctx):
    ctx.write("months", "SELECT m AS month_num, monthname(make_date(2026, m::INT, 1)) AS month_name FROM range(1, 13) t(m)")
    ctx.write("sales", "SELECT i AS sale_id, 1 + (hash(i) % 12)::INT AS month_num, (hash(i * 3) % 1000)::INT AS cents FROM range(4000) t(i)")

def month_starts(ctx):
    ctx.read("months")
    ctx.write("starts", "SELECT month_num, make_date(2026, month_num::INT, 1) AS first_day FROM months")

def monthly(ctx):
    ctx.read("months")
    ctx.read("sales")
    ctx.write("monthly", "SELECT make_date(2026, m.month_num::INT, 1) AS first_day, sum(s.cents) AS cents FROM sales s JOIN months m USING (month_num) GROUP BY ALL")

def month_over_month(ctx):
    ctx.read("months")
    ctx.write("mom", "SELECT month_num, lag(month_name) OVER (ORDER BY month_num) AS prev FROM months")

def busiest_days(ctx):
    ctx.write("days", "SELECT range + 1 AS doy, (hash(range) % 300)::INT AS visits FROM range(366)")

def busy(ctx):
    ctx.read("days")
    ctx.write("busy", "SELECT make_date(2024, 1, 1) + (doy - 1)::INT AS day, visits FROM days WHERE visits > 100")

def slots(ctx):
    ctx.write("slots", "SELECT strftime(TIMESTAMP '2026-01-01' + INTERVAL (i) MINUTE, '%H:%M') AS slot, (hash(i) % 5)::INT AS staff FROM range(1440) t(i)")

def numbered_slots(ctx):
    ctx.read("slots")
    ctx.write("numbered", "SELECT slot, row_number() OVER (ORDER BY slot) AS n, staff FROM slots")
"""


def test_correct_steps_on_a_table_of_months_are_not_failed_by_the_amplifiers(
    write_pipeline, twicerun
):
    """Row multiplication moved month_num past 12, and a correct make_date on it raised:
    AMPLIFICATION_FAILED, exit 5 (unseen77). The table of months is now left as written,
    said where the step reads it alone and beside the input that was multiplied. So is a
    table of the day's minutes written as text, whose repeated slots made a correct row
    number by slot STABLE_ON_THIS_INPUT, exit 4 (unseen98)."""
    outcome = twicerun("run", write_pipeline(KEYED_BY_A_MONTH), "--amplify", "--json", "-")
    assert outcome.code == 0, outcome.err
    steps = by_name(outcome.json())
    for name in ("month_starts", "monthly", "month_over_month", "busy", "numbered_slots"):
        assert steps[name]["status"] == "NO_DIVERGENCE_OBSERVED", steps[name]
    kept = "months is keyed by month_num (the months of a year, 1 to 12)"
    alone = {a["kind"]: a for a in steps["month_starts"]["amplifiers"]}
    assert alone["row multiplication"]["declined"].startswith(kept)
    beside = {a["kind"]: a for a in steps["monthly"]["amplifiers"]}
    assert "sales 4,000 rows to 8,000" in beside["row multiplication"]["detail"]
    assert kept in beside["row multiplication"]["detail"]
    # Not multiplied, a table of days still has its ties collapsed in the joint probe.
    days = {a["kind"]: a for a in steps["busy"]["amplifiers"]}
    assert days["row multiplication"]["declined"].startswith("days is keyed by doy (the days of")
    assert days["tie collapse"]["probed_with"] and (
        "days.visits into 2 values, from 2 to 183 rows per value, on every row (not multiplied)"
        in days["tie collapse"]["detail"]
    )


RELIED_ON_BY_CORRECT_STEPS = """
def events(ctx):
    ctx.write(
        "events",
        "SELECT range AS event_id, hash(range) % 600 AS user_id, "
        "'user-' || (hash(range) % 600) AS user_name, hash(range * 3) % 40 AS channel "
        "FROM range(6000)",
    )
    ctx.write(
        "items",
        "SELECT range AS item_id, (range * 0.731 + (hash(range) % 1000) * 1e-7)::DOUBLE AS score, "
        "'g' || (range % 50) AS grp FROM range(5000)",
    )
    ctx.write(
        "sales",
        "SELECT range AS sale_id, hash(range) % 600 AS product_id, "
        "['n', 's', 'e', 'w', 'c'][1 + (hash(range * 3) % 5)::INT] AS region, "
        "hash((hash(range) % 600) * 10 + hash(range * 3) % 5) % 5000 AS unit_price "
        "FROM range(6000)",
    )
    ctx.write(
        "daily_sales",
        "SELECT range AS sale_id, range % 40 AS product, "
        "DATE '2024-01-01' + ((range // 40) % 50)::INTEGER AS day, "
        "hash(range % 40, (range // 40) % 50) % 9000 AS price FROM range(30000)",
    )
    ctx.write(
        "usage",
        "SELECT range AS usage_id, range % 5 AS region, (range // 5) % 4 AS tier, "
        "DATE '2024-01-01' + ((range // 20) % 60)::INTEGER AS day, "
        "hash(range % 5, (range // 5) % 4, (range // 20) % 60) % 1000 AS rate FROM range(60000)",
    )

def per_user(ctx):
    ctx.read("events")
    ctx.sql("SET threads = 1")
    ctx.write(
        "per_user",
        "SELECT user_id, any_value(user_name) AS user_name, count(*) AS n FROM events GROUP BY user_id",
    )

def channel_per_user(ctx):
    ctx.read("events")
    ctx.sql("SET threads = 1")
    ctx.write("channels", "SELECT user_id, any_value(channel) AS c FROM events GROUP BY user_id")

def best_per_group(ctx):
    ctx.read("items")
    ctx.write("best", "SELECT grp, arg_max(item_id, score) AS best FROM items GROUP BY grp")

def regional_prices(ctx):
    ctx.read("sales")
    ctx.sql("SET threads = 1")
    ctx.write(
        "regional",
        "SELECT product_id, region, any_value(unit_price) AS unit_price, count(*) AS n "
        "FROM sales GROUP BY product_id, region",
    )

def daily_prices(ctx):
    ctx.read("daily_sales")
    ctx.sql("SET threads = 1")
    ctx.write(
        "daily_prices",
        "SELECT product, day, any_value(price) AS price, count(*) AS n "
        "FROM daily_sales GROUP BY product, day",
    )

def billed(ctx):
    ctx.read("usage")
    ctx.sql("SET threads = 1")
    ctx.write(
        "billed",
        "SELECT region, tier, day, any_value(rate) AS rate, count(*) AS n "
        "FROM usage GROUP BY region, tier, day",
    )
"""


def test_what_the_input_guarantees_is_not_taken_away_by_the_amplifiers(write_pipeline, twicerun):
    """Each user_id has one user_name, so `any_value(user_name)` per user is correct on any
    input where that holds; no two items share a score, so the best item per group is too;
    a product has one price in each region, and one on each day. Tie collapse folded the
    user's two columns apart (merged users kept their names) and the price apart from the
    product, and row multiplication repeated the float score as it was, and the steps came
    out STABLE_ON_THIS_INPUT. The daily price, which the product and day decide and neither
    alone, was folded on its own, which keeps that in the folded copy; but the joint probe
    folds only its added copy, so each product and day of the first copy met a second
    price there; so did a daily rate per region and tier, which three decide. The channel,
    which the user does not decide, still shows its step's pick."""
    outcome = twicerun(
        "run", write_pipeline(RELIED_ON_BY_CORRECT_STEPS), "--amplify", "--json", "-"
    )
    steps = by_name(outcome.json())
    for name, kind, said in [
        ("per_user", "tie collapse", "user_name moved with it"),
        ("best_per_group", "row multiplication", "score raised to the next float up"),
        ("regional_prices", "tie collapse", "product_id and region moved with it"),
        ("daily_prices", "tie collapse", "product and day moved with it"),
        ("billed", "tie collapse", "region, tier and day moved with it"),
    ]:
        assert steps[name]["status"] == "NO_DIVERGENCE_OBSERVED", steps[name]
        tried = {a["kind"]: a for a in steps[name]["amplifiers"]}
        assert said in tried[kind]["detail"]
        assert all(a["fired"] == 0 for a in tried.values())
    assert steps["channel_per_user"]["status"] == "STABLE_ON_THIS_INPUT"
    assert outcome.code == 4


DAILY_PER_TIER = """
def daily(ctx):
    ctx.write(
        "daily",
        "SELECT tier, DATE '2024-01-01' + d::INTEGER AS day, "
        "(hash(tier * 1000 + d) % 100000)::BIGINT AS total "
        "FROM range(4) t(tier), range(200) r(d)",
    )

def previous_day(ctx):
    ctx.read("daily")
    ctx.write(
        "deltas",
        "SELECT tier, day, total - lag(total) OVER (PARTITION BY tier ORDER BY day) AS delta "
        "FROM daily",
    )

def rank_by_total(ctx):
    ctx.read("daily")
    ctx.write(
        "ranked",
        "SELECT tier, day, row_number() OVER (PARTITION BY tier ORDER BY total) AS nth FROM daily",
    )
"""


def test_a_window_ordered_within_a_two_column_key_is_not_a_finding(write_pipeline, twicerun):
    """(tier, day) is the key of a daily total per tier. Tie collapse folded the tier and row
    multiplication repeated the pairs, so the change from the previous day, correct on
    any input with that key, came out STABLE_ON_THIS_INPUT. A rank by the total, which
    can tie, still fires."""
    outcome = twicerun("run", write_pipeline(DAILY_PER_TIER), "--amplify", "--json", "-")
    steps = by_name(outcome.json())
    assert steps["previous_day"]["status"] == "NO_DIVERGENCE_OBSERVED", steps["previous_day"]
    assert steps["rank_by_total"]["status"] == "STABLE_ON_THIS_INPUT"
    assert outcome.code == 4


RAW_TEXT = """
def raw(ctx):
    ctx.write(
        "raw",
        "SELECT (1000 + range)::VARCHAR AS code, (DATE '2024-01-01' + range::INTEGER)::VARCHAR "
        "AS day, range % 4 AS grp FROM range(2000)",
    )

def typed(ctx):
    ctx.read("raw")
    ctx.write("typed", "SELECT CAST(code AS BIGINT) AS code, CAST(day AS DATE) AS day, grp FROM raw")
"""


def test_a_step_that_casts_its_text_keys_is_not_broken_by_the_amplifiers(write_pipeline, twicerun):
    """Row multiplication kept a text key distinct with a suffix ('1000#1'), so a step
    casting it raised on the added copy: AMPLIFICATION_FAILED, exit 5, on correct code."""
    outcome = twicerun("run", write_pipeline(RAW_TEXT), "--amplify", "--json", "-")
    step = by_name(outcome.json())["typed"]
    assert step["status"] == "NO_DIVERGENCE_OBSERVED", step
    assert all(a["error"] is None and a["fired"] == 0 for a in step["amplifiers"])
    assert outcome.code == 0


def test_the_same_step_with_a_tiebreak_is_no_divergence_observed(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(FIRST_WITH_TIEBREAK), "--amplify", "--json", "-")
    step = by_name(outcome.json())["first_event"]
    assert step["status"] == "NO_DIVERGENCE_OBSERVED"
    assert all(a["fired"] == 0 for a in step["amplifiers"])
    assert outcome.code == 0


def test_a_stable_step_names_the_amplifier_that_broke_it(write_pipeline, twicerun):
    out = twicerun("run", write_pipeline(FIRST_PER_CUSTOMER), "--amplify").out
    assert "STABLE_ON_THIS_INPUT: agreed with itself on the input it was handed" in out
    assert "\n0 of 2 steps diverged, 1 more only under an amplifier, in " in out
    assert "  1 first_event: 4 of 4 under arrival order" in out
    assert "arrival order       4 of 4: events: run 1 as written" in out


def test_a_stable_step_shows_what_differed_under_the_amplifier_and_which_column(
    write_pipeline, twicerun
):
    # The loop has no comparison that differed, so the amplifier's series is the only place
    # the rows that moved are; the step's lines say what they were, attributed as the loop's are.
    document = twicerun(
        "run", write_pipeline(FIRST_PER_CUSTOMER), "--amplify", "--json", "-"
    ).json()
    out = twicerun("run", write_pipeline(FIRST_PER_CUSTOMER), "--amplify").out.splitlines()
    at = out.index(next(line for line in out if line.startswith("  1 first_event ")))
    assert out[at + 1 : at + 4] == [
        "        under arrival order, each run against that series' run 1:",
        "          firsts: 50 of 50 reference rows and 50 of 50 later rows found no partner",
        "          dropping event_id from the key pairs every row",
    ]
    arrival = next(
        a for a in by_name(document)["first_event"]["amplifiers"] if a["kind"] == "arrival order"
    )
    attributed = [
        a["findings"]["attribution"]
        for c in arrival["comparisons"]
        for a in c["artifacts"]
        if a["findings"] and a["findings"]["attribution"]
    ]
    assert [a["column"] for a in attributed] == ["event_id"]


def test_an_amplifier_that_fires_in_its_probe_continues_to_the_full_count(write_pipeline, twicerun):
    document = twicerun(
        "run", write_pipeline(FIRST_PER_CUSTOMER), "--amplify", "--json", "-"
    ).json()
    arrival = next(
        a for a in by_name(document)["first_event"]["amplifiers"] if a["kind"] == "arrival order"
    )
    # The probe is three runs; it fired, so runs 4 and 5 were added to it, not run afresh.
    assert arrival["runs"] == 5
    assert [c["run"] for c in arrival["comparisons"]] == [2, 3, 4, 5]
    quiet = next(
        a for a in by_name(document)["events"]["amplifiers"] if a["kind"] == "thread count"
    )
    assert (quiet["runs"], [c["run"] for c in quiet["comparisons"]]) == (3, [2, 3])


def test_a_quiet_step_is_probed_once_with_every_amplifier_and_reported_under_each(
    write_pipeline, twicerun, tmp_path
):
    run_dir = tmp_path / "runs"
    document = twicerun(
        "run",
        write_pipeline(FIRST_WITH_TIEBREAK),
        "--amplify",
        "--run-dir",
        str(run_dir),
        "--json",
        "-",
    ).json()
    amplifiers = {a["kind"]: a for a in by_name(document)["first_event"]["amplifiers"]}
    members = ["thread count", "arrival order", "tie collapse", "row multiplication"]
    for member in members:
        others = [m for m in members if m != member]
        assert amplifiers[member]["probed_with"] == others
        assert amplifiers[member]["detail"].startswith(
            f"probed together with {', '.join(others[:-1])} and {others[-1]}: "
        )
        assert amplifiers[member]["comparisons"] == amplifiers["thread count"]["comparisons"]
        assert (amplifiers[member]["runs"], amplifiers[member]["fired"]) == (3, 0)
    # Every variation is in the one probe's detail, the reordering of the stressed rows last.
    detail = amplifiers["thread count"]["detail"]
    assert "threads raised to 4" in detail
    assert detail.index("rows per value") < detail.index(" rows to ") < detail.index("shuffled")
    # One series ran, three executions; no member ran on its own.
    invocation = next(run_dir.glob("*/amplify-01-first_event-*")).parent
    series = sorted(p.name for p in invocation.glob("amplify-01-first_event-*"))
    assert series == ["amplify-01-first_event-threads+order+ties+rows"]
    assert len(list((invocation / series[0]).glob("*/*/receipt.json"))) == 3
    # The terminal prints that one probe once, with what it varied, not once per member.
    out = twicerun("judge", str(invocation)).out.splitlines()
    block = out[out.index("  1 first_event") + 1 :][:3]
    assert block == [
        "      tie collapse, thread count, row multiplication, arrival order, probed together: 0 of 2",
        "          " + detail.partition(": ")[2],
        "",
    ]
    # File order, declined by both steps for one reason, is said once above them.
    assert out[out.index("  0 events") - 1] == (
        "  file order, on every step below: not run: this step reads no list of files through "
        "ctx.source, so there is no order to change"
    )
    assert "probed together with" not in "\n".join(out)


def test_a_joint_probe_that_shows_a_difference_is_split_into_its_members(
    write_pipeline, twicerun, tmp_path
):
    run_dir = tmp_path / "runs"
    document = twicerun(
        "run",
        write_pipeline(FIRST_PER_CUSTOMER),
        "--amplify",
        "--run-dir",
        str(run_dir),
        "--json",
        "-",
    ).json()
    amplifiers = {a["kind"]: a for a in by_name(document)["first_event"]["amplifiers"]}
    # The joint probe fired: each member then ran alone, so the finding is attributed
    # to the amplifier that moves the step and the others keep their own zeros.
    assert amplifiers["arrival order"]["probed_with"] == []
    assert amplifiers["thread count"]["probed_with"] == []
    assert amplifiers["arrival order"]["fired"] > 0
    assert amplifiers["thread count"]["fired"] == 0
    assert amplifiers["thread count"]["detail"] == (
        "threads raised to 4 from the 2 in the loop; but the step set threads=1 itself, so "
        "threads=4 held at most until it did"
    )
    # Its second run already differed (the rows arrive in another order); like any probe
    # that fires it continued to the full count, which is what is reported should no
    # member move the step on its own (it is not reported here: one did).
    joint = next(run_dir.glob("*/amplify-01-first_event-threads+order+ties+rows"))
    assert len(list(joint.glob("*/*/receipt.json"))) == 5


# The top customers by total, without a tiebreak. Totals tie only at the bottom (a minimum
# charge), far from the top five, so the loop is quiet; ties collapsed alone keep the rows in
# order, and reordered rows alone have no ties at the top, so each amplifier alone is quiet
# too: only together do they move the step. (Were the totals all distinct, they would be a
# key of the input, which the amplifiers keep distinct.)
TOP_WITHOUT_TIEBREAK = """
def orders(ctx):
    ctx.write("orders", "SELECT range AS id, range % 50 AS customer, (range * 7) % 1000 AS amount FROM range(5000)")


def totals(ctx):
    ctx.read("orders")
    ctx.write("totals", "SELECT customer, greatest(sum(amount), 48000)::BIGINT AS total FROM orders GROUP BY customer")


def top(ctx):
    ctx.read("totals")
    ctx.write("top", "SELECT * FROM totals ORDER BY total DESC LIMIT 5")
"""


def test_a_difference_only_the_amplifiers_together_make_is_reported_not_dropped(
    write_pipeline, twicerun
):
    """The joint probe saw the step differ, was split, and no member alone moved it: the
    members' quiet series were reported and the step called NO_DIVERGENCE_OBSERVED."""
    outcome = twicerun(
        "run", write_pipeline(TOP_WITHOUT_TIEBREAK), "--threads", "2", "--amplify", "--json", "-"
    )
    top = by_name(outcome.json())["top"]
    assert (top["fired"], top["status"], top["cause"]) == (0, "STABLE_ON_THIS_INPUT", None)
    amplifiers = {a["kind"]: a for a in top["amplifiers"]}
    members = ["thread count", "arrival order", "tie collapse", "row multiplication"]
    for member in members:
        assert amplifiers[member]["probed_with"] == [m for m in members if m != member]
        assert (amplifiers[member]["runs"], amplifiers[member]["fired"]) == (5, 4)
        assert amplifiers[member]["detail"].endswith(
            "; on its own, none moved the step, in 2 comparisons each"
        )
    assert outcome.code == 4
    out = twicerun("judge", outcome.json()["artifacts"]).out
    assert (
        "  2 top: 4 of 4 under tie collapse, thread count, row multiplication and arrival "
        "order together\n"
    ) in out


def test_a_step_rejecting_a_stressed_input_is_told_what_the_amplifier_did_to_it(
    write_pipeline, twicerun
):
    """A correct step checking that no day is outside the year raised on row
    multiplication's added copy, and the report said only "calendar runs past 2024:
    2026-01-01", a day the input never held, without saying that the amplifier had moved
    the days. (Since 0.7.15 the copy's days are the year before, so the check is of the
    first day.)"""
    path = write_pipeline(
        """
        def calendar(ctx):
            ctx.write("calendar", "SELECT d::DATE AS day FROM range(DATE '2024-01-01', DATE '2025-01-01', INTERVAL 1 DAY) t(d)")


        def checked(ctx):
            ctx.read("calendar")
            (first,) = ctx.sql("SELECT min(day) FROM calendar").fetchall()[0]
            if str(first) < "2024-01-01":
                raise ValueError(f"calendar starts before 2024: {first}")
            ctx.write("months", "SELECT month(day) AS m, count(*) AS days FROM calendar GROUP BY ALL")
        """
    )
    outcome = twicerun("run", path, "--amplify")
    assert outcome.code == 5
    (line,) = [
        x for x in outcome.out.splitlines() if x.startswith("      row multiplication  FAILED")
    ]
    assert line.startswith(
        "      row multiplication  FAILED after 0 runs on calendar 366 rows to 732, day moved "
        "past its range in the added copy: step 1 checked raised in run 1"
    )


# Raises only on more rows than it wrote and with its ties collapsed: under the joint
# probe, never under one amplifier alone.
BREAKS_UNDER_BOTH = """
def base(ctx):
    ctx.write("base", "SELECT range AS id, range % 7 AS k FROM range(300)")


def fragile(ctx):
    ctx.read("base")
    n, densest = ctx.sql(
        "SELECT sum(c), max(c) FROM (SELECT count(*) AS c FROM base GROUP BY k)"
    ).fetchall()[0]
    # More rows (row multiplication), and more of them on one k than doubling the 43 or so
    # per value gives (tie collapse): neither alone.
    if n > 300 and densest > 100:
        raise ValueError("unexpected shape")
    ctx.write("out", "SELECT k, count(*) AS n FROM base GROUP BY k")
"""


def test_a_step_that_breaks_only_under_the_amplifiers_together_is_amplification_failed(
    write_pipeline, twicerun
):
    """It used to come out NO_DIVERGENCE_OBSERVED, the joint probe's failure dropped with
    its comparisons; now it fails, and the report names the failure once, not per member."""
    path = write_pipeline(BREAKS_UNDER_BOTH)
    outcome = twicerun("run", path, "--threads", "2", "--amplify", "--json", "-")
    fragile = by_name(outcome.json())["fragile"]
    assert fragile["status"] == "AMPLIFICATION_FAILED" and outcome.code == 5
    assert all("unexpected shape" in a["error"] for a in fragile["amplifiers"][:4])
    out = twicerun("judge", outcome.json()["artifacts"]).out.splitlines()
    (line,) = [x for x in out if x.startswith("  1 fragile: ")]
    assert line.startswith(
        "  1 fragile: tie collapse, thread count, row multiplication and arrival order "
        "together: step 1 fragile raised in run 1"
    )
    assert line.count("unexpected shape") == 1


PARALLEL_ONLY = """
import itertools

_calls = itertools.count()


def threaded(ctx):
    # Changes between runs only when more than one thread runs it.
    mark = next(_calls) if ctx.threads > 1 else 0
    ctx.write("t", f"SELECT {mark} AS mark")


def always(ctx):
    ctx.write("a", f"SELECT {next(_calls)} AS mark")
"""


def test_the_bisect_names_parallel_order_and_a_cause_that_persists(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(PARALLEL_ONLY), "--threads", "2", "--json", "-")
    steps = by_name(outcome.json())
    assert steps["threaded"]["cause"] == "PARALLEL_ORDER"
    assert steps["always"]["cause"] == "PERSISTS_SINGLE_THREADED"
    threaded, always = steps["threaded"]["bisect"], steps["always"]["bisect"]
    assert threaded["threads"] == always["threads"] == 1
    # 4 of 4 in the loop: two quiet comparisons at one thread settle it (under 5 percent
    # had one thread differed as often); one difference settles the other at once.
    assert (threaded["runs"], threaded["compared"], threaded["fired"]) == (3, 2, 0)
    assert "stopped after 2 quiet comparisons" in threaded["detail"]
    assert (always["runs"], always["compared"], always["fired"]) == (2, 1, 1)
    assert "stopped at the first difference" in always["detail"]
    out = twicerun("run", write_pipeline(PARALLEL_ONLY), "--threads", "2").out
    assert "  0 threaded  PARALLEL_ORDER            4 of 4 at threads=2, 0 of 2 at threads=1" in out
    assert "2 clean comparisons leave it anywhere up to 78 percent (95 percent, one-sided)" in out
    assert "up to 5 times, stopping once the cause was settled" in out


def test_a_step_that_raises_at_one_thread_has_no_cause_and_says_where(write_pipeline, twicerun):
    """The bisect's line for a step that raised there was never checked; it read "no cause:
    it raised at threads=1: step 0 odd raised in run 1 ...", which says "raised" twice and
    reads wrong for a step --step-timeout stopped."""
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def odd(ctx):
            if ctx.threads == 1:
                raise RuntimeError("one thread is not enough")
            ctx.write("a", f"SELECT {next(_calls)} AS mark")
        """
    )
    outcome = twicerun("run", path, "--threads", "2", "--runs", "3")
    assert outcome.code == 1, outcome.err
    assert (
        f"  0 odd  no cause, since at threads=1 step 0 odd raised in run 1 (at {path}:8): "
        "RuntimeError: one thread is not enough"
    ) in outcome.out.splitlines()


@pytest.mark.parametrize(
    ("differed", "compared", "quiet_runs"),
    [(4, 4, 2), (3, 4, 4), (1, 4, None), (2, 4, None), (9, 9, 2)],
)
def test_the_bisect_stops_once_a_zero_would_be_improbable_at_the_loops_rate(
    differed, compared, quiet_runs
):
    stop = enough(differed, compared)
    quiet = Comparison(run=2, fired=False, artifacts=[])
    stopped_at = next((n for n in range(1, compared + 1) if stop([quiet] * n)), None)
    # A rarely differing step is never stopped early: it gets every comparison.
    assert stopped_at == quiet_runs
    differing = Comparison(run=2, fired=True, artifacts=[], error="boom")
    assert "first difference" in stop([differing])


def test_the_posterior_chance_of_quiet_runs_is_the_beta_binomial_mean():
    # Beta(5, 1): the mean of (1 - p)^2 is 2 * 5! / 7! = 1/21.
    assert quiet_chance(4, 4, 2) == pytest.approx(1 / 21, rel=1e-12)
    # Beta(1, 5): the mean of (1 - p)^3 is B(1, 8) / B(1, 5) = 5/8.
    assert quiet_chance(0, 4, 3) == pytest.approx(5 / 8, rel=1e-12)


def test_a_loop_already_at_one_thread_is_not_bisected(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(PARALLEL_ONLY), "--threads", "1", "--json", "-")
    always = by_name(outcome.json())["always"]
    assert (always["cause"], always["bisect"]) == (None, None)
    (note,) = [n for n in always["notes"] if n.startswith("not bisected")]
    assert note.startswith("not bisected: the loop already ran at threads=1")
    assert note.endswith("--threads 2 or more gives one")  # what to do about it


@pytest.mark.parametrize("m", range(1, 11))
def test_the_one_sided_bound_on_a_zero_is_the_closed_form(m):
    assert upper_bound(0, m) == pytest.approx(1 - 0.05 ** (1 / m), rel=1e-12)


@pytest.mark.parametrize(("k", "m"), [(1, 4), (2, 10), (5, 9)])
def test_the_bound_above_zero_leaves_five_percent_in_the_lower_tail(k, m):
    import math

    p = upper_bound(k, m)
    tail = sum(math.comb(m, i) * p**i * (1 - p) ** (m - i) for i in range(k + 1))
    assert tail == pytest.approx(0.05, abs=1e-9)


THREADS_DRIFT = """
import itertools

_calls = itertools.count()


def terms(ctx):
    ctx.write("terms", "SELECT i, (1.0 / (i + 1))::DOUBLE AS v FROM range(3000) r(i)")


def total(ctx):
    ctx.read("terms")
    # Sums in another order on every run, but only with more threads than the loop's two.
    shift = next(_calls) if ctx.threads > 2 else 0
    ctx.write("total", f"SELECT 1 AS id, sum(v ORDER BY hash(i + {shift})) AS s FROM terms")
"""


def test_the_policy_judges_amplified_findings_too(write_pipeline, twicerun):
    path = write_pipeline(THREADS_DRIFT)
    strict = twicerun("run", path, "--threads", "2", "--amplify", "--json", "-")
    step = by_name(strict.json())["total"]
    assert step["status"] == "STABLE_ON_THIS_INPUT"
    assert strict.code == 4
    tolerant = twicerun(
        "run", path, "--threads", "2", "--amplify", "--policy", "reduction-order", "--json", "-"
    )
    step = by_name(tolerant.json())["total"]
    threads = next(a for a in step["amplifiers"] if a["kind"] == "thread count")
    assert (threads["fired"], threads["tolerated"]) == (0, 2)
    assert step["status"] == "NO_DIVERGENCE_OBSERVED"
    assert tolerant.code == 0


def test_a_step_that_raises_under_an_amplifier_is_amplification_failed(write_pipeline, twicerun):
    path = write_pipeline(
        INPUTS
        + """

def strict_count(ctx):
    ctx.read("events")
    ((n,),) = ctx.sql("SELECT count(*) FROM events").fetchall()
    if n != 2000:
        raise ValueError(f"expected 2000 events, got {n}")
    ctx.write("count", f"SELECT {n} AS n")
"""
    )
    outcome = twicerun("run", path, "--amplify", "--json", "-")
    step = by_name(outcome.json())["strict_count"]
    assert step["status"] == "AMPLIFICATION_FAILED"
    failed = [a for a in step["amplifiers"] if a["error"]]
    assert [a["kind"] for a in failed] == ["row multiplication"]
    assert "expected 2000 events, got 4000" in failed[0]["error"]
    assert outcome.code == 5


def test_a_declined_amplifier_is_listed_as_not_varied_never_as_a_zero(write_pipeline, twicerun):
    outcome = twicerun("run", write_pipeline(INPUTS), "--amplify", "--json", "-")
    step = by_name(outcome.json())["events"]
    declined = {a["kind"]: a["declined"] for a in step["amplifiers"] if a["declined"]}
    assert set(declined) == {"tie collapse", "row multiplication", "arrival order", "file order"}
    assert all(a["compared"] == 0 for a in step["amplifiers"] if a["declined"])
    out = twicerun("run", write_pipeline(INPUTS), "--amplify").out
    assert (
        "  0 events  varied: the loop 0 of 4, thread count 0 of 2; not varied (declined or "
        "not run): tie collapse, row multiplication, arrival order, file order"
    ) in out
    # Declined for one reason, they share a line; thread count, which ran, keeps its own.
    lines = out.splitlines()
    assert lines[lines.index("  0 events") + 1 :][:4] == [
        "      tie collapse, row multiplication, arrival order, not run: this step reads no "
        "artifact through ctx.read, so there is no input to stress",
        "      thread count        0 of 2: threads raised to 4 from the 2 in the loop",
        "      file order          not run: this step reads no list of files through ctx.source, "
        "so there is no order to change",
        "",
    ]


def test_every_report_ends_with_what_was_not_varied(write_pipeline, twicerun):
    out = twicerun("run", write_pipeline(INPUTS), "--amplify").out
    assert out.splitlines()[-1].startswith(
        "Not varied by this invocation, whatever a step's status says: DuckDB version, memory "
        "limit and spilling, input distribution beyond what the amplifiers changed, wall clock, "
        "filesystem, the Python process (its string hash seed, so the order of a set of "
        "strings; `twicerun audit` varies it)"
    )
    no_amp = twicerun("run", write_pipeline(INPUTS), "--no-amplify").out
    assert "every amplifier (--no-amplify)" in no_amp.splitlines()[-1]
    assert "amplification: not run (--no-amplify)" in no_amp


def test_values_that_read_as_each_runs_own_time_get_a_wall_clock_hint(
    write_pipeline, twicerun, tmp_path
):
    # A clock read the way pipelines read one: DuckDB's now(), Python's datetime as ISO
    # text, and time.time() as a float that drifts rather than a key that moves.
    path = write_pipeline(
        """
        import datetime
        import time

        import pyarrow as pa


        def sql_now(ctx):
            ctx.write("stamped", "SELECT range AS id, now() AS loaded_at FROM range(5)")


        def python_text(ctx):
            at = datetime.datetime.now().isoformat()
            ctx.write("batch", pa.table({"n": [1, 2], "at": [at, at]}))


        def epoch(ctx):
            ctx.write("meta", pa.table({"n": [1], "at": [time.time()]}))


        def epoch_ns(ctx):
            ctx.write("meta_ns", pa.table({"n": [1], "at": [time.time_ns()]}))
        """
    )
    document = tmp_path / "result.json"
    outcome = twicerun("run", path, "--json", document)
    steps = json.loads(document.read_text())["steps"]
    assert [(s["status"], s["cause"], s["hints"]) for s in steps] == [
        ("DIVERGENT", "PERSISTS_SINGLE_THREADED", ["WALL_CLOCK"])
    ] * 4
    assert [line for line in outcome.out.splitlines() if "hint WALL_CLOCK" in line] == [
        line for line in outcome.out.splitlines() if " 4 of 4  DIVERGENT" in line
    ]


def test_a_result_recorded_before_the_values_were_read_keeps_its_clock_hint_when_judged(
    write_pipeline, twicerun, run_dir
):
    """A Result from 0.7.16 or earlier has no `clock` in its attributions; `judge` re-scores
    it by the column's type, as it was scored then, rather than drop the hint."""
    path = write_pipeline(
        """
        def stamped(ctx):
            ctx.write("stamped", "SELECT range AS id, now() AS loaded_at FROM range(5)")
        """
    )
    twicerun("run", path)
    (saved,) = run_dir.glob("*/result.json")
    document = json.loads(saved.read_text())
    stripped = 0
    for comparison in document["steps"][0]["comparisons"]:
        for artifact in comparison["artifacts"]:
            attribution = artifact["findings"]["attribution"]
            if attribution is not None:
                assert attribution.pop("clock") is True
                stripped += 1
    assert stripped
    saved.write_text(json.dumps(document))
    judged = twicerun("judge", saved.parent, "--json", "-").json()["steps"][0]
    assert (judged["cause"], judged["hints"]) == ("PERSISTS_SINGLE_THREADED", ["WALL_CLOCK"])


def test_a_timestamp_that_moved_but_is_no_clock_read_gets_no_hint(write_pipeline, twicerun):
    """The hint used to follow the column's type alone, so `first(ts)` over ties, a
    parallel-order bug in a timestamp from the data, read "cause PARALLEL_ORDER  hint
    WALL_CLOCK", which contradicts itself. Here both ways it went wrong, made repeatable:
    a data timestamp that changes from run to run at any thread count, and a clock (and
    uuid()) read only at more than one thread, so that one thread stops the step differing."""
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def picked(ctx):
            ctx.write(
                "picked",
                f"SELECT range AS id, TIMESTAMP '2024-01-01' + INTERVAL ({next(_calls)}) DAY "
                f"AS seen_at FROM range(5)",
            )


        def clock_in_parallel(ctx):
            at = "now()" if ctx.threads > 1 else "TIMESTAMPTZ '2024-01-01 00:00:00+00'"
            ctx.write("stamped", f"SELECT range AS id, {at} AS loaded_at FROM range(5)")


        def ids_in_parallel(ctx):
            key = "uuid()" if ctx.threads > 1 else "'00000000-0000-4000-8000-000000000000'::UUID"
            ctx.write("keyed", f"SELECT range AS id, {key} AS order_key FROM range(5)")
        """
    )
    steps = twicerun("run", path, "--threads", "2", "--json", "-").json()["steps"]
    assert [(s["status"], s["cause"], s["hints"]) for s in steps] == [
        ("DIVERGENT", "PERSISTS_SINGLE_THREADED", []),
        ("DIVERGENT", "PARALLEL_ORDER", []),
        ("DIVERGENT", "PARALLEL_ORDER", []),
    ]


def test_a_uuid_column_that_moved_gets_a_random_uuid_hint(write_pipeline, twicerun):
    # Surrogate keys from uuid(): every row is unpaired until the id is dropped, which
    # named the column and nothing more.
    path = write_pipeline(
        """
        def keyed(ctx):
            ctx.write("keyed", "SELECT range AS order_id, uuid() AS order_key FROM range(5)")
        """
    )
    step = twicerun("run", path, "--json", "-", "--no-amplify").json()["steps"][0]
    assert (step["status"], step["hints"]) == ("DIVERGENT", ["RANDOM_UUID"])
    # An id that only passes through stays put, and names nothing.
    steady = write_pipeline(
        """
        def keyed(ctx):
            ctx.write("keyed", "SELECT range AS order_id, "
                      "md5(range::VARCHAR)::UUID AS order_key FROM range(5)")
        """
    )
    step = twicerun("run", steady, "--json", "-", "--no-amplify").json()["steps"][0]
    assert (step["status"], step["hints"]) == ("NO_DIVERGENCE_OBSERVED", [])


GENERATORS = """
import random

from twicerun import step


def unseeded(ctx):
    ctx.write("drawn", f"SELECT {random.randrange(2)} AS coin")


@step(stochastic=True, seed="seed")
def seeded(ctx, seed: int = 7):
    random.seed(seed)
    ctx.write("dealt", f"SELECT {random.randrange(1000)} AS card")


def draws_nothing(ctx):
    ctx.write("plain", "SELECT 1 AS one")
"""


def test_a_step_drawing_from_pythons_random_unseeded_is_named_whatever_its_cause(
    write_pipeline, twicerun, run_dir
):
    """A step drawing a coin from Python's random module differs in half its comparisons,
    and at one thread too; with two or four clean single-threaded comparisons by chance the
    bisect names PARALLEL_ORDER. The generator's own state says what happened: each run left
    it somewhere else. A step that seeds it leaves it in one place; one that draws nothing
    leaves it untouched."""
    path = write_pipeline(GENERATORS)
    outcome = twicerun("run", path, "--runs", "5", "--no-amplify", "--json", "-")
    steps = by_name(outcome.json())
    said = (
        "drew from Python's random module with no seed fixed in the step: its runs left it in "
        "states of their own, so they drew other numbers, at any thread count"
    )
    assert [n for n in steps["unseeded"]["notes"] if n.startswith(said)], steps["unseeded"]
    assert steps["seeded"]["notes"] == [] and steps["seeded"]["fired"] == 0
    assert steps["draws_nothing"]["notes"] == []
    receipts = {
        p.parent.name: json.loads(p.read_text()) for p in run_dir.glob("*/loop/1/*/receipt.json")
    }
    assert receipts["00-unseeded"]["generators"].startswith("Python's random module:")
    assert receipts["01-seeded"]["generators"].startswith("Python's random module:")
    assert receipts["02-draws_nothing"]["generators"] is None


def test_a_seed_set_once_at_import_is_named_as_no_seed_of_the_steps_own(write_pipeline, twicerun):
    """A pipeline that calls random.seed(42) at the top of its file did seed the generator,
    and a note saying only "without seeding it" read as wrong to its author; the seed is
    spent by run 1, and later runs start where run 1 left it. So did a step calling
    random.seed() with no value, which takes a new seed from the system each time: the note
    says no seed was fixed in the step, and why neither fixes one."""
    path = write_pipeline(
        "import random\n\nrandom.seed(42)\n\n\n"
        'def draws(ctx):\n    ctx.write("drawn", f"SELECT {random.random()} AS v")\n\n\n'
        "def reseeds(ctx):\n    random.seed()\n"
        '    ctx.write("redrawn", f"SELECT {random.random()} AS v")\n'
    )
    steps = twicerun("run", path, "--runs", "3", "--no-amplify", "--json", "-").json()["steps"]
    said = (
        "drew from Python's random module with no seed fixed in the step: its runs left it in "
        "states of their own, so they drew other numbers, at any thread count (a seed set "
        "once, at import, only fixes where run 1 starts, and seed() with no value takes a new "
        "one from the system each time)"
    )
    for step in steps:
        assert step["fired"] == 2
        assert [n for n in step["notes"] if n.startswith(said)], step["notes"]


def test_a_generator_the_file_makes_at_import_is_named_as_the_modules_is(
    write_pipeline, twicerun, run_dir
):
    """`RNG = random.Random(7)` at the top of the file is one stream for the process, as the
    random module is: a step drawing from it differed in every comparison, at one thread
    too, and got no note saying why, where the same draw from the module got one. Found
    through a helper of the file as well; a step that seeds it every run, or only holds
    one, is not named, and a SystemRandom, which has no state to read, is left out."""
    path = write_pipeline(
        "import random\n\nRNG = random.Random(7)\nSYSTEM = random.SystemRandom()\n\n\n"
        "def _pick():\n    return RNG.randint(0, 10**9)\n\n\n"
        'def draws(ctx):\n    ctx.write("drawn", f"SELECT {RNG.random()} AS v")\n\n\n'
        'def draws_in_helper(ctx):\n    ctx.write("picked", f"SELECT {_pick()} AS v")\n\n\n'
        "def reseeds(ctx):\n    RNG.seed(3)\n"
        '    ctx.write("reseeded", f"SELECT {RNG.random()} AS v")\n\n\n'
        'def holds(ctx):\n    ctx.write("held", f"SELECT {len(repr(RNG))} > 0 AS v")\n\n\n'
        'def system(ctx):\n    ctx.write("sys", f"SELECT {SYSTEM.random()} AS v")\n'
    )
    steps = {
        s["name"]: s
        for s in twicerun("run", path, "--runs", "3", "--no-amplify", "--json", "-").json()["steps"]
    }
    said = (
        "drew from the generator RNG (a random.Random) with no seed fixed in the step: its "
        "runs left it in states of their own, so they drew other numbers, at any thread count"
    )
    for name in ("draws", "draws_in_helper"):
        assert steps[name]["fired"] == 2
        assert [n for n in steps[name]["notes"] if n.startswith(said)], steps[name]["notes"]
    assert steps["reseeds"]["fired"] == 0 and steps["reseeds"]["notes"] == []
    assert steps["holds"]["fired"] == 0 and steps["holds"]["notes"] == []
    assert steps["system"]["fired"] == 2
    assert not [n for n in steps["system"]["notes"] if "generator" in n]
    receipts = {
        p.parent.name: json.loads(p.read_text()) for p in run_dir.glob("*/loop/1/*/receipt.json")
    }
    assert receipts["00-draws"]["generators"].startswith("the generator RNG (a random.Random):")
    assert receipts["03-holds"]["generators"] is None


SEEDED = """
import itertools

from twicerun import step

_calls = itertools.count()


@step(stochastic=True, seed="seed")
def sample(ctx, seed: int = 7):
    ctx.sql(f"SELECT setseed({seed} / 100.0)")
    ctx.write("sample", "SELECT range AS id FROM range(100) WHERE random() < 0.5")


@step(stochastic=True, seed="seed")
def ignores_its_seed(ctx, seed: int = 7):
    ctx.write("drawn", f"SELECT {next(_calls)} AS value")
"""


def test_a_seeded_step_holds_its_seed_and_says_when_the_seed_does_not_control_it(
    write_pipeline, twicerun
):
    path = write_pipeline(SEEDED)
    outcome = twicerun("run", path, "--seed", "sample=11", "--json", "-")
    steps = by_name(outcome.json())
    assert (steps["sample"]["seed"], steps["sample"]["stochastic"]) == (11, True)
    assert steps["sample"]["fired"] == 0
    assert steps["ignores_its_seed"]["seed"] == 7
    assert steps["ignores_its_seed"]["fired"] == 4
    out = twicerun("run", path).out
    assert (
        "the seed was held at 7 in every run and the result moved anyway, so the seed does not "
        "control this step"
    ) in out


@pytest.mark.parametrize(
    ("source", "code"),
    [
        (INPUTS, 0),
        (PARALLEL_ONLY, 1),
        ("X = 1\n", 2),
        ("def boom(ctx):\n    raise RuntimeError('no')\n", 3),
        (FIRST_PER_CUSTOMER, 4),
    ],
)
def test_each_exit_code_through_the_real_cli(write_pipeline, twicerun, source, code):
    outcome = twicerun("run", write_pipeline(source), "--threads", "2", "--amplify")
    assert outcome.code == code, outcome.err


ONLY_AT_MORE_THREADS = """
import itertools

_calls = itertools.count()


def crowded(ctx):
    # Changes between runs only above the loop's two threads.
    mark = next(_calls) if ctx.threads > 2 else 0
    ctx.write("t", f"SELECT {mark} AS mark")
"""


def test_a_step_quiet_in_the_loop_that_moves_at_more_threads_is_bisected_too(
    write_pipeline, twicerun
):
    outcome = twicerun(
        "run", write_pipeline(ONLY_AT_MORE_THREADS), "--threads", "2", "--amplify", "--json", "-"
    )
    step = by_name(outcome.json())["crowded"]
    assert (step["fired"], step["status"]) == (0, "STABLE_ON_THIS_INPUT")
    assert (step["cause"], step["bisect"]["fired"], step["bisect"]["threads"]) == (
        "PARALLEL_ORDER",
        0,
        1,
    )
    out = twicerun("run", write_pipeline(ONLY_AT_MORE_THREADS), "--threads", "2", "--amplify").out
    assert (
        "0 crowded  0 of 4  STABLE_ON_THIS_INPUT  ROW_MISSING ROW_EXTRA  cause PARALLEL_ORDER"
        in out
    )
    assert "(in the loop, or under thread count where the loop was quiet)" in out
    assert (
        "  0 crowded  PARALLEL_ORDER            4 of 4 under thread count, 0 of 2 at threads=1"
        in out
    )


# Each execution writes a number no earlier one wrote, and keeps what its state holds: a
# rerun on its own output answers as the run before it did, so the loop, whose later runs
# read run 1's copy, sees nothing, while runs that all start from the initial rows differ
# at any thread count.
NEW_EVERY_EXECUTION_KEPT_BY_STATE = """
import itertools

_calls = itertools.count()


def kept(ctx):
    mark = next(_calls)
    ctx.state("kept", "SELECT 0::BIGINT AS k, 0::BIGINT AS mark WHERE false")
    ctx.write(
        "kept",
        "SELECT k, arg_min(mark, src) AS mark FROM ("
        "SELECT k, mark, 0 AS src FROM kept "
        f"UNION ALL SELECT range AS k, {mark} AS mark, 1 AS src FROM range(3)) GROUP BY k",
    )
"""


def test_a_difference_only_the_thread_count_series_saw_is_bisected_from_the_same_state(
    write_pipeline, twicerun
):
    """The bisect read state as the loop's later runs do, even when what it explained was
    the thread-count amplifier's difference, whose runs all start from the initial rows:
    anchored on run 1's copy, one thread showed nothing, and a step that differs at any
    thread count was called PARALLEL_ORDER."""
    outcome = twicerun(
        "run",
        write_pipeline(NEW_EVERY_EXECUTION_KEPT_BY_STATE),
        "--threads",
        "2",
        "--amplify",
        "--json",
        "-",
    )
    step = by_name(outcome.json())["kept"]
    assert (step["fired"], step["status"]) == (0, "STABLE_ON_THIS_INPUT"), step
    fired = {a["kind"]: a["fired"] for a in step["amplifiers"]}
    assert fired["thread count"] > 0
    assert (step["cause"], step["bisect"]["fired"], step["bisect"]["threads"]) == (
        "PERSISTS_SINGLE_THREADED",
        1,
        1,
    )


ONE_SIDED = """
import itertools

_runs = itertools.count(1)


def sometimes(ctx):
    run = next(_runs)
    ctx.write("always", "SELECT 1 AS x")
    if run == 1:
        ctx.write("first_only", "SELECT 7 AS y")
        ctx.write("first_empty", "SELECT 7 AS y WHERE false")
    if run == 2:
        ctx.write("second_only", "SELECT range AS z FROM range(3)")
"""


@pytest.mark.parametrize(
    "line",
    [
        "first_only: written by run 1 and not by run 2, so its one row is missing there",
        "second_only: written by run 2 and not by run 1, so its 3 rows are all extra",
        "first_empty: written by run 1 and not by run 2, so the whole artifact is missing "
        "there, though it has no rows",
    ],
)
def test_an_artifact_only_one_run_wrote_is_counted_as_a_sentence_reads(
    write_pipeline, twicerun, line
):
    outcome = twicerun("run", write_pipeline(ONE_SIDED), "--runs", "3", "--no-amplify")
    assert line in outcome.out


ODD_NAMES = """
import itertools

_runs = itertools.count(1)


def odd(ctx):
    run = next(_runs)
    ctx.write(
        "totals",
        f'SELECT 1 AS "the key", 0.5 + {run % 2} * 1e-16 AS "tot al" '
        f'UNION ALL SELECT 2, 0.25',
    )
    extra = ", (1, 'a')" if run == 2 else ""
    ctx.write("pairs", f"SELECT * FROM (VALUES (1, 'a'), (1, 'a'){extra}) v(k, s)")
"""


def test_evidence_quotes_a_column_name_that_is_not_one_word_and_counts_one_row_as_one(
    write_pipeline, twicerun
):
    out = twicerun("run", write_pipeline(ODD_NAMES), "--runs", "3", "--no-amplify").out
    assert 'totals: 1 of 2 paired rows moved on "tot al"' in out
    assert 'furthest move over 2 comparisons: "tot al", 1 ulp and' in out
    assert (
        "pairs: 1 row of run 2 repeats a row that run 1 has fewer times "
        "(2 rows in run 1, 3 in run 2)"
    ) in out


NAN_OR_NULL = """
import itertools

_runs = itertools.count(1)


def flips(ctx):
    value = "NULL" if next(_runs) % 2 == 0 else "'NaN'::DOUBLE"
    ctx.write("x", f"SELECT range AS id, CASE WHEN range = 5 THEN {value} ELSE 0.5::DOUBLE END AS v "
                   "FROM range(10)")
"""


def test_values_that_became_nan_or_null_are_counted_per_comparison_as_the_rows_are(
    write_pipeline, twicerun
):
    """One value flips in each of two comparisons: "1 of 10 paired rows moved" stood above
    "2 values of v moved to or from NaN or NULL", the second summed over the comparisons."""
    out = twicerun("run", write_pipeline(NAN_OR_NULL), "--runs", "5", "--no-amplify").out
    assert "x: 1 of 10 paired rows moved on v" in out
    assert "x: 1 value of v moved to or from NaN or NULL, which no ulp count describes" in out


NESTED_NAMES = """
import itertools

_runs = itertools.count(1)


def nested(ctx):
    run = next(_runs)
    ctx.write(
        "stats",
        f"SELECT 1 AS k, {{'mean': 0.5 + {run % 2} * 1e-16, 'n': 2}} AS s, "
        f"{{'tot al': [0.25 + {run % 2} * 1e-16]}} AS \\"odd col\\"",
    )
"""


def test_a_path_into_a_nested_column_reads_as_a_path_with_only_odd_names_quoted(
    write_pipeline, twicerun
):
    """Quoting the whole path made `s.mean` read as one column named "s.mean"."""
    outcome = twicerun("run", write_pipeline(NESTED_NAMES), "--runs", "3", "--no-amplify")
    assert "stats: 1 of 1 paired rows moved on s.mean" in outcome.out
    assert 'stats: 1 of 1 paired values moved on "odd col"."tot al"[]' in outcome.out
    document = twicerun(
        "run", write_pipeline(NESTED_NAMES), "--runs", "3", "--no-amplify", "--json", "-"
    ).json()
    (step,) = document["steps"]
    paths = {
        d["column"]
        for c in step["comparisons"]
        for a in c["artifacts"]
        if a["findings"]
        for d in a["findings"]["drift"]
    }
    assert paths == {"s.mean", '"odd col"."tot al"[]'}


SETS_ITS_OWN_THREADS = """
def single(ctx):
    ctx.sql("SET threads = 1")
    ctx.write("t", "SELECT sum(1.0 / (range + 1)) AS s FROM range(1000)")


def left_alone(ctx):
    ctx.write("u", "SELECT 1 AS v")
"""


def test_a_step_that_sets_its_own_thread_count_is_told_apart(write_pipeline, twicerun):
    """A step that ran `SET threads = 1` was reported as run at the loop's threads=2 and
    stressed at a raised count, none of which was in force for its queries."""
    path = write_pipeline(SETS_ITS_OWN_THREADS)
    document = twicerun("run", path, "--runs", "2", "--threads", "2", "--json", "-").json()
    notes = {s["name"]: s["notes"] for s in document["steps"]}
    assert notes["single"] == [
        "sets its own thread count (threads=1 by the end of the step), so the loop's "
        "threads=2 was not in force for the queries after that SET, nor is any raised "
        "count an amplifier names below"
    ]
    assert notes["left_alone"] == []


def test_many_quiet_steps_varied_alike_share_one_line_and_few_keep_their_names(
    write_pipeline, twicerun
):
    def copy(i):
        return (
            f'\n\ndef copy{i}(ctx):\n    ctx.read("events")\n'
            f'    ctx.write("c{i}", "SELECT * FROM events ORDER BY event_id")\n'
        )

    # A module counter: fires in every comparison, so it is not among the quiet steps.
    counted = (
        "\n\nRUNS = []\n\n\ndef counted(ctx):\n    RUNS.append(1)\n"
        '    ctx.write("n", f"SELECT {len(RUNS)} AS n")\n'
    )
    # Steps 0 to 2 and 4 to 6 are quiet and were varied alike (no amplifier ran); 3 fires.
    many = INPUTS + copy(1) + copy(2) + counted + copy(4) + copy(5) + copy(6)
    out = twicerun("run", write_pipeline(many), "--no-amplify").out.splitlines()
    header = next(i for i, line in enumerate(out) if line.startswith("NO_DIVERGENCE_OBSERVED"))
    assert out[header + 1] == (
        "  steps 0 to 2 and 4 to 6: varied: the loop 0 of 4; not varied (declined or not run): "
        "every amplifier"
    )
    assert out[header + 2].startswith("  4 clean comparisons leave")
    # Four alike keep a line each, with their names.
    few = INPUTS + copy(1) + copy(2) + copy(3)
    out = twicerun("run", write_pipeline(few, "few.py"), "--no-amplify").out.splitlines()
    header = next(i for i, line in enumerate(out) if line.startswith("NO_DIVERGENCE_OBSERVED"))
    assert out[header + 1 : header + 5] == [
        f"  {i} {name:<6}  varied: the loop 0 of 4; not varied (declined or not run): every amplifier"
        for i, name in enumerate(["events", "copy1", "copy2", "copy3"])
    ]


def test_a_step_whose_first_execution_alone_differs_is_not_passed_off_as_thread_order(
    write_pipeline, twicerun
):
    # Only the first call in the process writes other rows. Every later run agrees with
    # every other, and so does every re-execution at one thread, all after the first: the
    # bisect says PARALLEL_ORDER, and the report said nothing to doubt it.
    path = write_pipeline(
        "import itertools\n\n_calls = itertools.count()\n\n\n"
        "def warm_up(ctx):\n"
        '    ctx.write("d", f"SELECT range AS k, {min(next(_calls), 1)} AS v FROM range(3)")\n'
    )
    out = twicerun("run", path, "--runs", "4", "--no-amplify").out.splitlines()
    assert out[8].endswith("DIVERGENT  ROW_MISSING ROW_EXTRA  cause PARALLEL_ORDER")
    assert out[11] == (
        "        runs 2 to 4 all wrote the same rows, and only run 1 other ones: a step whose "
        "first execution in a process differs from the rest (a module-level cache or "
        "counter, a file its first run left) looks like this too, and the re-executions at "
        "one thread, all after the first, could not tell the two apart"
    )


def test_a_report_at_one_thread_without_the_thread_amplifier_says_parallel_order_was_not_varied(
    write_pipeline, twicerun
):
    """DuckDB picks one thread on a one-core machine (a small CI container): every run then
    orders its work the same way, and with the thread-count amplifier off a step summing
    floats in any order came out NO_DIVERGENCE_OBSERVED while the report's list of what was
    not varied left the thread count out."""
    path = write_pipeline(INPUTS)
    said = (
        "the thread count: every run was at threads=1, where no step can show a difference "
        "that comes from the order of parallel work (--threads 2 or more varies it, and so "
        "does the thread-count amplifier)"
    )
    for flags in (["--no-amplify"], ["--amplify", "--without", "thread-count"]):
        last = twicerun("run", path, "--threads", "1", *flags).out.splitlines()[-1]
        assert said in last, (flags, last)
    assert said not in twicerun("run", path, "--threads", "1", "--amplify").out
    assert said not in twicerun("run", path, "--threads", "2", "--no-amplify").out


def test_a_step_that_sets_its_own_thread_count_gets_no_cause_from_the_bisect(
    write_pipeline, twicerun
):
    """The bisect re-executes at one thread, and a step that runs `SET threads = 3` undoes
    that: it differed there as in the loop, and was labelled PERSISTS_SINGLE_THREADED,
    "one thread did not stop it", of a step that never ran at one thread."""
    path = write_pipeline(
        """
        import itertools

        _calls = itertools.count()


        def counted(ctx):
            ctx.sql("SET threads = 3")
            ctx.write("counted", f"SELECT {next(_calls)} AS n")
        """
    )
    document = twicerun("run", path, "--json", "-").json()
    (step,) = document["steps"]
    assert step["status"] == "DIVERGENT"
    assert step["cause"] is None
    assert step["bisect"]["error"] == (
        "the step set threads=3 itself, so threads=1 held at most until it did"
    )
    assert (
        "  0 counted  no cause, since at threads=1 the step set threads=3 itself, so "
        "threads=1 held at most until it did"
    ) in twicerun("run", path).out.splitlines()


def test_an_amplifier_whose_raised_thread_count_a_step_undid_says_so(write_pipeline, twicerun):
    """A step that runs `SET threads = 2` at a loop of 2 has no note in the loop, where the
    count it set was the count it was given; under the thread-count amplifier it undid the
    raised count, and the report said "threads raised to 4" and "varied: thread count"."""
    path = write_pipeline(
        """
        def base(ctx):
            ctx.write("base", "SELECT range AS id, range % 7 AS g FROM range(1000)")


        def pinned(ctx):
            ctx.read("base")
            ctx.sql("SET threads = 2")
            ctx.write("counts", "SELECT g, count(*) AS n FROM base GROUP BY g")
        """
    )
    outcome = twicerun("run", path, "--threads", "2", "--amplify", "--json", "-")
    step = by_name(outcome.json())["pinned"]
    assert not step["notes"]
    (threads,) = [a for a in step["amplifiers"] if a["kind"] == "thread count"]
    assert threads["detail"].endswith(
        "; but the step set threads=2 itself, so threads=4 held at most until it did"
    )
    base = by_name(outcome.json())["base"]
    assert "held at most until" not in " ".join(a["detail"] or "" for a in base["amplifiers"])


OWN_THREADS = """
    import itertools
    from concurrent.futures import ThreadPoolExecutor

    _calls = itertools.count()


    def base(ctx):
        ctx.write("base", "SELECT range AS id, range % 7 AS g FROM range(1000)")


    def pooled(ctx):
        ctx.read("base")
        with ThreadPoolExecutor(2) as pool:
            parts = list(pool.map(lambda g: g * 2, range(4)))
        ctx.write("pooled", f"SELECT {next(_calls) if DRIFT else 0} + {sum(parts)} AS n")
"""


def test_a_step_that_starts_threads_of_its_own_gets_no_cause_from_the_bisect(
    write_pipeline, twicerun
):
    """The bisect holds DuckDB and pyarrow at one thread, not a ThreadPoolExecutor the step
    starts: a step that differed with its own threads running was labelled
    PERSISTS_SINGLE_THREADED, "one thread did not stop it", though it never ran on one."""
    path = write_pipeline("DRIFT = True\n" + textwrap.dedent(OWN_THREADS))
    document = twicerun("run", path, "--json", "-").json()
    steps = by_name(document)
    pooled = steps["pooled"]
    assert pooled["status"] == "DIVERGENT"
    assert pooled["cause"] is None
    started = "2 threads (from pipeline.py:16)"
    assert pooled["bisect"]["error"] == (
        f"the step started {started} itself, which the thread count does not reach, so its "
        f"difference there may be theirs, not one thread's"
    )
    assert pooled["notes"] == [
        f"started {started} itself: the thread counts twicerun sets (the loop's, the "
        f"bisect's one, an amplifier's raised one) hold DuckDB and pyarrow, not these, so "
        f"how work is shared among them, and in what order it finishes, was never varied "
        f"or held still"
    ]
    # twicerun's own helpers start threads throughout; none is the step's.
    assert steps["base"]["notes"] == []
    assert (
        f"  1 pooled  no cause, since at threads=1 the step started {started} itself, which "
        f"the thread count does not reach, so its difference there may be theirs, not one "
        f"thread's"
    ) in twicerun("run", path).out.splitlines()


def test_the_thread_count_amplifier_says_the_steps_own_threads_were_out_of_reach(
    write_pipeline, twicerun
):
    """ "threads raised to 4" and "varied: thread count" were said of a step whose parallel
    work was its own pool's, which the raised count never reached."""
    path = write_pipeline("DRIFT = False\n" + textwrap.dedent(OWN_THREADS))
    outcome = twicerun("run", path, "--runs", "3", "--amplify", "--json", "-")
    pooled = by_name(outcome.json())["pooled"]
    assert pooled["status"] == "NO_DIVERGENCE_OBSERVED"
    details = {a["kind"]: a["detail"] or "" for a in pooled["amplifiers"]}
    assert details["thread count"].endswith(
        "; but the step started 2 threads (from pipeline.py:16) itself, which the thread "
        "count does not reach"
    )


def test_processes_and_programs_a_step_starts_are_counted_and_twicerun_s_threads_are_not():
    import multiprocessing
    import subprocess
    import sys
    import threading

    from twicerun.runner.own_workers import counting, describe

    thread_start, process_start = threading.Thread.start, multiprocessing.Process.start
    popen_init = subprocess.Popen.__init__
    with counting() as started:
        process = multiprocessing.get_context("fork").Process(target=int)
        process.start()
        process.join()
        subprocess.run([sys.executable, "-c", "pass"], check=True)
        helper = threading.Thread(target=int, name="twicerun-connections_0")
        helper.start()
        helper.join()
    forked, ran = started.record()
    assert forked.startswith("processes at test_cause_and_status.py:")
    assert ran.startswith("processes at test_cause_and_status.py:")
    assert describe({forked: 1}).startswith("1 process (from test_cause_and_status.py:")
    # Put back as found: a thread started after the step is nobody's business.
    assert threading.Thread.start is thread_start
    assert multiprocessing.Process.start is process_start
    assert subprocess.Popen.__init__ is popen_init
    with counting() as again:
        pass
    assert again.record() == {}


def test_a_step_with_threads_of_its_own_that_one_thread_quiets_is_still_parallel_order(
    write_pipeline, twicerun
):
    """Its own workers ran at one thread as they ran in the loop, so a difference that
    stopped there was DuckDB's or pyarrow's threads: that cause is still given."""
    path = write_pipeline(
        """
        import itertools
        from concurrent.futures import ThreadPoolExecutor

        _calls = itertools.count()


        def pooled(ctx):
            with ThreadPoolExecutor(2) as pool:
                parts = list(pool.map(lambda g: g * 2, range(4)))
            mark = next(_calls) if ctx.threads > 1 else 0
            ctx.write("pooled", f"SELECT {mark} + {sum(parts)} AS n")
        """
    )
    (step,) = twicerun("run", path, "--threads", "2", "--json", "-").json()["steps"]
    assert step["status"] == "DIVERGENT"
    assert step["cause"] == "PARALLEL_ORDER"
    assert step["bisect"]["error"] is None
    assert step["notes"][0].startswith("started 2 threads (from pipeline.py:9) itself")


def test_threads_a_library_starts_for_a_step_are_named_by_the_steps_own_line(
    write_pipeline, twicerun, tmp_path_factory
):
    """A download manager's pool is started inside the library: naming its file and line
    told the user nothing about which line of theirs asked for it."""
    # Installed elsewhere, as a library is: not beside the pipeline.
    library = tmp_path_factory.mktemp("site") / "fetcher.py"
    library.write_text(
        "from concurrent.futures import ThreadPoolExecutor\n\n\n"
        "def fetch_all(n):\n"
        "    with ThreadPoolExecutor(2) as pool:\n"
        "        return sum(pool.map(lambda i: i, range(n)))\n"
    )
    path = write_pipeline(
        f"""
        import sys

        sys.path.insert(0, {str(library.parent)!r})
        import fetcher


        def fetched(ctx):
            total = fetcher.fetch_all(4)
            ctx.write("fetched", f"SELECT {{total}} AS n")
        """
    )
    (step,) = twicerun("run", path, "--runs", "2", "--json", "-").json()["steps"]
    assert step["notes"][0].startswith("started 2 threads (from pipeline.py:8) itself")


def test_a_step_reading_a_module_value_an_earlier_step_fills_gets_no_cause(
    write_pipeline, twicerun
):
    """One step fills a module dict with random numbers, the next writes rows from it. The
    dict reached the second step in every run past containment; its bisect, re-running it
    alone on what the last run left, went quiet and was reported PARALLEL_ORDER."""
    path = write_pipeline(FILLS_A_DICT)
    steps = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    use = steps[1]
    assert (use["status"], use["cause"]) == ("DIVERGENT", None)
    assert use["notes"] == [
        "reads SHARED of its file, which a later run did not find as run 1 did: what another "
        "step, or an earlier run, changes there reaches this step past containment, so a "
        "difference here may come from there (hand the rows over with ctx.write and ctx.read)"
    ]
    assert use["bisect"]["error"] == (
        "SHARED of its file, which it reads, changed between the loop's runs and held still "
        "here, as the last execution before left it, so going quiet here says nothing of one "
        "thread"
    )
    # The step that fills it differed in nothing it wrote, and is told nothing of it.
    assert not any("SHARED" in note for note in steps[0]["notes"])


@pytest.mark.parametrize("holder", ["class", "instance"])
def test_a_step_reading_an_attribute_an_earlier_step_sets_gets_no_cause(
    write_pipeline, twicerun, holder
):
    """One step set a class attribute (or an attribute of a module-level object of the
    file) from a random draw, the next filtered by it: only plain values were watched, and
    the second step was PARALLEL_ORDER. The step that sets it only writes into it, and is
    told nothing."""
    made = {
        "class": "class Settings:\n    cutoff = 500\n\n\nSETTINGS = Settings\n",
        "instance": (
            "class Settings:\n    def __init__(self):\n        self.cutoff = 500\n\n\n"
            "SETTINGS = Settings()\n"
        ),
    }[holder]
    path = write_pipeline(
        "import random\n\n" + made + "\n\ndef pick(ctx):\n"
        "    SETTINGS.cutoff = random.randint(0, 1000)\n"
        '    ctx.write("picked", "SELECT 1 AS ok")\n\n\n'
        "def use(ctx):\n"
        '    ctx.read("picked")\n'
        '    ctx.write("out", f"SELECT count(*) AS n FROM range(1000) t(i) '
        'WHERE hash(i) % 1000 < {SETTINGS.cutoff}")\n'
    )
    steps = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    use = steps[1]
    assert (use["status"], use["cause"]) == ("DIVERGENT", None)
    assert use["bisect"]["error"].startswith("SETTINGS of its file, which it reads, changed")
    assert not any("SETTINGS" in note for note in steps[0]["notes"])


@pytest.mark.parametrize(
    ("written", "cause"),
    [
        ("1 if CALLS['n'] == 1 else 2", None),
        ("CALLS['n'] if ctx.threads > 1 else 0", "PARALLEL_ORDER"),
    ],
)
def test_a_step_whose_first_execution_differs_by_a_module_value_gets_no_cause(
    write_pipeline, twicerun, written, cause
):
    """A step that writes other rows on the process's first call, by a counter of its file,
    was PARALLEL_ORDER: only the loop's run 1 differed, and its bisect, every execution
    after the first, went quiet. The counter moved there too, so the held-still rule did
    not see it; no execution of the bisect found it as run 1 did. The rule needs the later
    runs to agree: where they differ among themselves and one thread stops it, the counter
    the step also reads does not take the cause away."""
    path = write_pipeline(
        f"""
        CALLS = {{"n": 0}}


        def step(ctx):
            CALLS["n"] += 1
            ctx.write("out", f"SELECT {{{written}}} AS v")
        """
    )
    (step,) = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    assert (step["status"], step["cause"]) == ("DIVERGENT", cause)
    assert step["bisect"]["error"] == (
        None
        if cause
        else "no execution here found CALLS of its file, which it reads, as the loop's run 1 "
        "did, and run 1 alone wrote other rows, so going quiet here says nothing of one thread"
    )


def test_a_dict_every_step_writes_counts_into_takes_no_cause_away(write_pipeline, twicerun):
    """A module dict each step only writes into (row counts, timings) was watched as if the
    steps read it: it moved between the loop's runs and held still in the bisect, so every
    step of such a pipeline lost its cause, and its note said it reads the dict."""
    path = write_pipeline(
        """
        import itertools

        METRICS = {}
        LOG = []
        _calls = itertools.count()


        def by_threads(ctx):
            mark = next(_calls) if ctx.threads > 1 else 0
            ctx.write("out", f"SELECT {mark} AS v")
            METRICS["by_threads"] = 1
            LOG.append("by_threads done")
        """
    )
    (step,) = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    assert (step["status"], step["cause"]) == ("DIVERGENT", "PARALLEL_ORDER")
    assert step["bisect"]["error"] is None
    assert step["notes"] == []


def test_a_cache_the_step_fills_on_first_use_takes_no_cause_away_from_a_thread_race(
    write_pipeline, twicerun
):
    """A lookup kept in a module dict, filled by the step's first execution and read by
    every later one: run 1 found it empty and the rest full, and the bisect found it full
    too, so the held-still rule took the cause away. But the later runs found it full as
    well and still disagreed among themselves, so the step changed with it held still,
    and one thread's quiet says what it always does."""
    path = write_pipeline(
        """
        import itertools

        _LOOKUP = {}
        _calls = itertools.count()


        def by_threads(ctx):
            if "codes" not in _LOOKUP:
                _LOOKUP["codes"] = ["a", "b", "c"]
            mark = next(_calls) if ctx.threads > 1 else 0
            ctx.write("out", f"SELECT {mark} AS v, {len(_LOOKUP['codes'])} AS n")
        """
    )
    (step,) = twicerun("run", path, "--runs", "4", "--threads", "2", "--json", "-").json()["steps"]
    assert (step["status"], step["cause"]) == ("DIVERGENT", "PARALLEL_ORDER")
    assert step["bisect"]["error"] is None


@pytest.mark.parametrize(
    ("initial", "body", "watched"),
    [
        ("{}", "N['k'] = 1", False),
        ("{'k': 0}", "del N['k']", False),
        ("[]", "N.append(1)", False),
        ("{}", "N.update({'k': 1})", False),
        ("{'k': 0}", "N['k'] += 1", True),
        ("{}", "N['k'] = len(N)", True),
        ("[]", "x = N.append", True),
        ("[1, 2]", "rows = N.pop()", True),
        ("{'k': 0}", "return N['k']", True),
        ("{}", "N.update(N)", True),
        # A class of the file (type() here makes one in the module) and its attributes.
        ("type('C', (), {'a': 0})", "N.a = 1", False),
        ("type('C', (), {'a': 0})", "del N.a", False),
        ("type('C', (), {'a': 0})", "N.a += 1", True),
        ("type('C', (), {'a': 0})", "return N.a", True),
    ],
)
def test_what_a_step_only_writes_into_is_not_watched_as_read(
    write_pipeline, initial, body, watched
):
    """The values a step reads, digested before every execution, leave out a global the
    step only writes into; any mention that could read it keeps it."""
    import importlib.util

    from twicerun.pipeline.uses import read_now

    path = write_pipeline(
        f"""
        N = {initial}


        def step(ctx):
            {body}
        """
    )
    spec = importlib.util.spec_from_file_location("written_only", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    values, _, _ = read_now(module.step)
    assert ("N" in values) is watched


@pytest.fixture
def side_variable():
    """An environment variable name the pipeline below sets, removed again afterwards."""
    import os

    name = "TWICERUN_TEST_SIDE_SEED"
    yield name
    os.environ.pop(name, None)


@pytest.mark.parametrize(
    "channel",
    [
        "file",
        "text",
        "pyarrow",
        "suffix",
        "database",
        "export",
        "partitioned",
        "pickle",
        "environment",
    ],
)
def test_a_step_reading_a_file_or_variable_an_earlier_step_rewrites_gets_no_cause(
    write_pipeline, twicerun, tmp_path, tmp_path_factory, side_variable, channel
):
    """The same past containment through a file an earlier step's SQL writes and this
    step's SQL reads, and through an environment variable: PARALLEL_ORDER both times."""
    side = tmp_path / {
        "database": "side.duckdb",
        "export": "exported",
        "partitioned": "parts",
        "text": "side.txt",
        "suffix": "side_table.dat",
    }.get(channel, "side.parquet")
    if channel == "pickle":
        # Outside the pipeline's directory: a cache in /tmp, say.
        side = tmp_path_factory.mktemp("elsewhere") / "cache.pkl"
    sql_copy = "COPY (SELECT i, random() AS r FROM range(100) t(i))"
    pyarrow = "import random\n\nimport pyarrow as pa\nimport pyarrow.parquet as pq"
    # Per channel: the imports, what `build` leaves past ctx, and how `use` reads it.
    steps = {
        "file": (
            "",
            f"ctx.sql(\"{sql_copy} TO '{side}'\")",
            f'ctx.write("out", "SELECT i, r > 0.5 AS big FROM \'{side}\' ORDER BY i")',
        ),
        # A CSV by another name, handed to read_csv: no suffix says it holds rows.
        "text": (
            "",
            f"ctx.sql(\"{sql_copy} TO '{side}' (FORMAT csv)\")",
            f'ctx.write("out", "SELECT i, r > 0.5 AS big FROM read_csv(\'{side}\') ORDER BY i")',
        ),
        "pyarrow": (
            pyarrow,
            'rows = pa.table({"i": list(range(50)), "r": [random.random() for _ in range(50)]})\n'
            f'pq.write_table(rows, "{side}")',
            f't = pq.read_table("{side}")\n'
            'ctx.write("out", ctx.sql("SELECT i, r > 0.5 AS big FROM t").to_arrow_table())',
        ),
        "database": (
            "",
            f"ctx.sql(\"ATTACH '{side}' AS w\")\n"
            'ctx.sql("CREATE OR REPLACE TABLE w.side AS SELECT i, random() AS r FROM range(100) t(i)")\n'
            'ctx.sql("DETACH w")',
            f"ctx.sql(\"ATTACH '{side}' AS w (READ_ONLY)\")\n"
            'ctx.write("out", "SELECT i, r > 0.5 AS big FROM w.side ORDER BY i")',
        ),
        # IMPORT DATABASE read the directory EXPORT DATABASE wrote, unseen: PARALLEL_ORDER.
        "export": (
            "",
            'ctx.sql("CREATE TABLE side AS SELECT i, random() AS r FROM range(100) t(i)")\n'
            f"ctx.sql(\"EXPORT DATABASE '{side}' (FORMAT parquet)\")",
            f"ctx.sql(\"IMPORT DATABASE '{side}'\")\n"
            'ctx.write("out", "SELECT i, r > 0.5 AS big FROM side ORDER BY i")',
        ),
        # A tree of files under the one path the COPY names: its writer is named all the same.
        "partitioned": (
            "",
            'ctx.sql("COPY (SELECT i, i % 3 AS g, random() AS r FROM range(100) t(i)) "\n'
            f"        \"TO '{side}' (FORMAT parquet, PARTITION_BY (g), OVERWRITE_OR_IGNORE)\")",
            f'ctx.write("out", "SELECT i, r > 0.5 AS big FROM \'{side}/**/*.parquet\' ORDER BY i")',
        ),
        # Opened from Python where nothing beside the pipeline is: watched because a step
        # wrote it.
        "pickle": (
            "import pickle\nimport random\n\nimport pyarrow as pa",
            f'with open({str(side)!r}, "wb") as f:\n'
            "    pickle.dump([random.random() for _ in range(100)], f)",
            f'with open({str(side)!r}, "rb") as f:\n'
            "    r = pickle.load(f)\n"
            'ctx.write("out", pa.table({"i": list(range(100)), "big": [x > 0.5 for x in r]}))',
        ),
        "environment": (
            "import os\nimport random",
            f'os.environ["{side_variable}"] = str(random.randint(0, 10**9))',
            f'seed = int(os.environ["{side_variable}"])\n'
            'ctx.write("out", f"SELECT i, hash(i + {seed}) % 2 = 0 AS big FROM range(100) t(i)")',
        ),
    }
    # Parquet under a name no file of rows has, written and read by pyarrow.
    steps["suffix"] = steps["pyarrow"]
    imports, leaves, reads = steps[channel]
    path = write_pipeline(
        f"{imports}\n\n\ndef build(ctx):\n{textwrap.indent(leaves, '    ')}\n"
        '    ctx.write("marker", "SELECT 1 AS one")\n\n\n'
        f"def use(ctx):\n{textwrap.indent(reads, '    ')}\n"
    )
    use = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"][1]
    what = {
        "environment": f"environment variable {side_variable}",
        "export": f"files {side}/*",
        "partitioned": f"files {side}/**/*.parquet",
    }.get(channel, f"file {side}")
    assert (use["status"], use["cause"]) == ("DIVERGENT", None)
    assert (
        f"reads {what}, which a later run did not find as run 1 did: what another step, or an "
        "earlier run, changes there reaches this step past containment, so a difference here "
        "may come from there (hand the rows over with ctx.write and ctx.read)"
    ) in use["notes"]
    assert use["bisect"]["error"].startswith(f"{what}, which it reads, changed between")
    # Which step to look at: the one that wrote the file while it ran.
    if channel != "environment":
        assert use["notes"][-1] == f"step 0 build writes {what} past ctx.write"


@pytest.mark.parametrize(
    "built",
    [
        'pq.read_table(os.path.join(STAGE, "x.parquet"))',
        'pq.read_table(f"{STAGE}/x.parquet")',
        'pq.read_table(pathlib.Path(STAGE) / "x.parquet")',
        'pq.read_table(STAGE + "/x.parquet")',
        'pa.concat_tables([pq.read_table(f) for f in glob.glob(f"{STAGE}/*.parquet")])',
        # The directory read whole: watched because a step wrote into it.
        "pq.read_table(STAGE)",
    ],
)
def test_a_file_read_by_a_path_built_when_the_step_runs_is_watched(
    write_pipeline, twicerun, tmp_path, built
):
    """A step read back an earlier step's random export with pyarrow through a path joined
    from a directory and a name: no string of its code named the file whole, pyarrow's
    read raises no audit event, and the step was PARALLEL_ORDER though one thread, on the
    same export every time, had nothing to go quiet on."""
    stage = tmp_path / "stage"
    path = write_pipeline(
        f"""
        import glob
        import os
        import pathlib

        import pyarrow as pa
        import pyarrow.parquet as pq

        STAGE = {str(stage)!r}


        def export(ctx):
            os.makedirs(STAGE, exist_ok=True)
            ctx.sql(f"COPY (SELECT i, random() AS r FROM range(50) t(i)) TO '{{STAGE}}/x.parquet'")
            ctx.write("marker", "SELECT 1 AS one")


        def load_back(ctx):
            ctx.write("loaded", {built})
        """
    )
    steps = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    use = steps[1]
    assert (use["status"], use["cause"]) == ("DIVERGENT", None)
    side = (
        "files " + os.path.join(str(stage), "*.parquet")
        if "glob" in built
        else "files " + os.path.join(str(stage), "*")
        if built == "pq.read_table(STAGE)"
        else "file " + os.path.join(str(stage), "x.parquet")
    )
    # A glob listed in Python is watched twice over: by the strings, and as a listing.
    assert use["bisect"]["error"].startswith(side)
    assert "which it reads, changed between" in use["bisect"]["error"]
    # The export names its directory alone, which it replaced a file in.
    assert use["notes"][-1].startswith(f"step 0 export writes {side}")
    assert use["notes"][-1].endswith(" past ctx.write")


def test_a_directory_a_step_lists_and_reads_with_pyarrow_is_watched(
    write_pipeline, twicerun, tmp_path
):
    """A step listed an earlier step's random exports (os.listdir) and read each with
    pyarrow: no string of its code named a file, pyarrow's reads raise no audit event, and
    the step was PARALLEL_ORDER."""
    stage = tmp_path / "stage"
    path = write_pipeline(
        f"""
        import os

        import pyarrow as pa
        import pyarrow.parquet as pq


        def export(ctx):
            os.makedirs({str(stage)!r}, exist_ok=True)
            for part in range(2):
                ctx.sql(f"COPY (SELECT i, random() AS r FROM range(20) t(i)) TO '{stage}/p{{part}}.parquet'")
            ctx.write("marker", "SELECT 1 AS one")


        def gather(ctx):
            names = sorted(os.listdir({str(stage)!r}))
            parts = [pq.read_table(os.path.join({str(stage)!r}, n)) for n in names]
            ctx.write("gathered", pa.concat_tables(parts))
        """
    )
    use = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"][1]
    assert (use["status"], use["cause"]) == ("DIVERGENT", None)
    assert use["bisect"]["error"].startswith("files stage/*, which it reads, changed between")
    assert use["notes"][-1] == "step 0 export writes files stage/* past ctx.write"


@pytest.mark.parametrize("export", ["listing", "path"])
def test_a_step_exporting_into_a_directory_it_cleans_keeps_its_cause(
    write_pipeline, twicerun, tmp_path, export
):
    """A step that emptied its export directory (os.listdir, os.remove) and exported into
    it with COPY, which Python never sees written, was taken to read what it had left
    there: the export moved between the loop's runs and held still at one thread, and a
    thread race lost its cause. An export named by a built path, rewritten some runs with
    the bytes it had, was taken for a read the same way."""
    out = tmp_path / "exports"
    clean = (
        "for f in os.listdir(OUT):\n                os.remove(os.path.join(OUT, f))"
        if export == "listing"
        else "pass"
    )
    path = write_pipeline(
        f"""
        import itertools
        import os

        OUT = {str(out)!r}
        _calls = itertools.count()


        def export(ctx):
            os.makedirs(OUT, exist_ok=True)
            {clean}
            # Runs 1 and 2 export the same bytes at two threads, the later ones others.
            mark = next(_calls) // 2 if ctx.threads > 1 else 0
            ctx.sql(f"COPY (SELECT {{mark}} AS v) TO '{{OUT}}/sums.parquet'")
            ctx.write("sums", f"SELECT {{mark}} AS v")
        """
    )
    use = twicerun("run", path, "--runs", "4", "--threads", "2", "--json", "-").json()["steps"][0]
    assert (use["status"], use["cause"]) == ("DIVERGENT", "PARALLEL_ORDER")
    assert not any("which a later run did not find" in note for note in use["notes"])


def test_a_directory_the_import_system_lists_is_not_taken_for_one_the_step_read(
    write_pipeline, twicerun, tmp_path
):
    """Importing a module beside the pipeline for the first time lists the pipeline's
    directory, where an earlier step writes random rows: the step read nothing there, so
    no note may say it did, and it keeps the cause one thread gives it."""
    helper = f"helper_{tmp_path.name.replace('-', '_')}"
    (tmp_path / f"{helper}.py").write_text("SHIFT = 0\n")
    path = write_pipeline(
        f"""
        import itertools

        _calls = itertools.count()


        def export(ctx):
            ctx.sql("COPY (SELECT i, random() AS r FROM range(20) t(i)) TO '{tmp_path}/side.parquet'")
            ctx.write("marker", "SELECT 1 AS one")


        def by_threads(ctx):
            import {helper}

            mark = next(_calls) if ctx.threads > 1 else {helper}.SHIFT
            ctx.write("out", f"SELECT {{mark}} AS v")
        """
    )
    use = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"][1]
    assert (use["status"], use["cause"]) == ("DIVERGENT", "PARALLEL_ORDER")
    assert not any("which a later run did not find" in note for note in use["notes"])


@pytest.mark.parametrize("reader", ["sql", "pyarrow"])
def test_a_file_an_earlier_step_rewrites_with_the_same_bytes_takes_no_cause_away(
    write_pipeline, twicerun, tmp_path, reader
):
    """An earlier step exports the same rows in every run; its file's stat moves each time
    and its bytes do not. Watched by the stat, the step reading it lost its cause and was
    told the file changed; watched by its bytes, it keeps PARALLEL_ORDER."""
    side = tmp_path / "stage.parquet"
    read = {
        "sql": f"n = ctx.sql(\"SELECT count(*) FROM '{side}'\").fetchone()[0]",
        "pyarrow": f"n = pq.read_table('{side}').num_rows",
    }[reader]
    path = write_pipeline(
        f"""
        import itertools

        import pyarrow.parquet as pq

        _calls = itertools.count()


        def export(ctx):
            ctx.sql("COPY (SELECT i FROM range(100) t(i) ORDER BY i) TO '{side}'")
            ctx.write("marker", "SELECT 1 AS one")


        def by_threads(ctx):
            {read}
            mark = next(_calls) if ctx.threads > 1 else 0
            ctx.write("out", f"SELECT {{mark}} AS v, {{n}} AS n")
        """
    )
    steps = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    use = steps[1]
    assert (use["status"], use["cause"]) == ("DIVERGENT", "PARALLEL_ORDER")
    assert not any("stage.parquet, which a later run" in note for note in use["notes"])


@pytest.mark.parametrize("rows", ["random() AS r", "i AS r"])
def test_files_a_glob_in_the_steps_sql_reads_are_watched_too(
    write_pipeline, twicerun, tmp_path, rows
):
    """A glob in a step's SQL was not watched at all: an earlier step that rewrote the files
    it matches with random rows left the reading step PARALLEL_ORDER. Rewritten with the
    same bytes, they take nothing away."""
    stage = tmp_path / "stage"
    stage.mkdir()
    path = write_pipeline(
        f"""
        import itertools

        _calls = itertools.count()


        def export(ctx):
            for part in ("a", "b"):
                ctx.sql(
                    f"COPY (SELECT i, {rows} FROM range(50) t(i) ORDER BY i) "
                    f"TO '{stage}/part_{{part}}.parquet'"
                )
            ctx.write("marker", "SELECT 1 AS one")


        def by_threads(ctx):
            mark = next(_calls) if ctx.threads > 1 else 0
            ctx.write("out", f"SELECT {{mark}} AS v, count(*) AS n FROM '{stage}/part_*.parquet'")
        """
    )
    use = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"][1]
    watched = any(f"files {stage}/part_*.parquet, which a later run" in n for n in use["notes"])
    if rows.startswith("random"):
        assert watched and use["cause"] is None
    else:
        assert not watched and use["cause"] == "PARALLEL_ORDER"


def test_a_file_is_fingerprinted_by_its_bytes_up_to_the_limit_and_by_its_stat_above(
    tmp_path, monkeypatch
):
    import os

    from twicerun.storage import fingerprints

    path = tmp_path / "side.parquet"
    path.write_bytes(b"rows")
    first = fingerprints.fingerprint(str(path))
    os.replace(_written(tmp_path / "next", b"rows"), path)  # rewritten: another inode
    assert fingerprints.fingerprint(str(path)) == first
    os.replace(_written(tmp_path / "next", b"other rows"), path)
    assert fingerprints.fingerprint(str(path)) not in (first, None)
    monkeypatch.setattr(fingerprints, "CONTENT_LIMIT", 4)
    stat = os.stat(path)
    assert fingerprints.fingerprint(str(path)) == (
        f"{stat.st_ino}:{stat.st_size}:{stat.st_mtime_ns}"
    )
    assert fingerprints.fingerprint(str(tmp_path / "absent.parquet")) is None


def test_a_glob_is_read_only_while_its_files_come_to_the_limit_together(tmp_path, monkeypatch):
    """A glob over a landing directory of large files was read whole, every file under
    the limit on its own: gigabytes before the step's first execution."""
    import os

    from twicerun.storage import fingerprints

    for name in ("a", "b"):
        (tmp_path / f"{name}.parquet").write_bytes(b"rows")
    pattern = str(tmp_path / "*.parquet")
    monkeypatch.setattr(fingerprints, "CONTENT_LIMIT", 8)  # both together: 8 bytes
    read = fingerprints.fingerprint(pattern)
    os.replace(_written(tmp_path / "next", b"rows"), tmp_path / "a.parquet")
    assert fingerprints.fingerprint(pattern) == read  # the same bytes, read
    monkeypatch.setattr(fingerprints, "CONTENT_LIMIT", 7)  # past it together: stated
    stated = fingerprints.fingerprint(pattern)
    os.replace(_written(tmp_path / "next", b"rows"), tmp_path / "a.parquet")
    assert fingerprints.fingerprint(pattern) not in (stated, None)


def _written(path, data: bytes):
    path.write_bytes(data)
    return path


def test_a_file_a_step_exports_itself_is_not_said_to_be_read(write_pipeline, twicerun, tmp_path):
    """A step that writes a copy of its rows with pyarrow finds the file as its previous
    run left it each time; that is its output, not something handed to it."""
    export = tmp_path / "export.parquet"
    path = write_pipeline(
        f"""
        import pyarrow.parquet as pq


        def exporter(ctx):
            t = ctx.sql("SELECT i, random() AS r FROM range(20) t(i)").to_arrow_table()
            pq.write_table(t, "{export}")
            ctx.write("out", t)
        """
    )
    (step,) = twicerun("run", path, "--runs", "3", "--threads", "2", "--json", "-").json()["steps"]
    assert (step["status"], step["cause"]) == ("DIVERGENT", "PERSISTS_SINGLE_THREADED")
    assert not any("export.parquet" in note for note in step["notes"])


def test_listed_directories_share_one_budget_of_bytes_and_a_walk_is_not_watched(
    tmp_path, monkeypatch
):
    """Each listed directory was read up to 64 MiB on its own, so a step walking a landing
    tree of many directories would have had gigabytes hashed after its first execution."""
    from twicerun.runner import opened
    from twicerun.storage import fingerprints

    limits = []
    real = fingerprints.fingerprint

    def spy(path, limit=None):
        limits.append((os.path.basename(os.path.dirname(path)), limit))
        return real(path, limit)

    monkeypatch.setattr(fingerprints, "fingerprint", spy)
    monkeypatch.setattr(opened, "CONTENT_LIMIT", 150)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "rows.parquet").write_bytes(b"x" * 100)
    recording = opened.Recording((tmp_path,), tmp_path / "runs")
    for name in ("a", "b"):
        recording.consider_listing(tmp_path / name)
    assert set(recording.listings(tmp_path)) == {"a/*", "b/*"}
    # The first directory's 100 bytes fit the budget of 150 and are read; the second's
    # would not, and are stated.
    assert limits == [("a", fingerprints.CONTENT_LIMIT), ("b", -1)]
    for k in range(opened.LISTED_LIMIT - 1):
        (tmp_path / f"d{k}").mkdir()
        recording.consider_listing(tmp_path / f"d{k}")
    assert recording.listings(tmp_path) == {}


DRAWS_IN_SQL = """
from twicerun import step


def src(ctx):
    ctx.write("t", "SELECT i AS id, i % 7 AS g FROM range(1000) t(i)")


def shuffled_top(ctx):
    ctx.read("t")
    ctx.write("top", "SELECT id FROM t ORDER BY random() LIMIT 10")


def sampled(ctx):
    ctx.read("t")
    ctx.write("sample", "SELECT id FROM t USING SAMPLE 10 ROWS")


def shuffled_by_relation(ctx):
    ctx.write("top_rel", ctx.read("t").order("random()").limit(10))


def sampled_with_a_seed(ctx):
    ctx.read("t")
    ctx.write("seeded", "SELECT id FROM t USING SAMPLE 10 ROWS (reservoir, 7)")


@step(stochastic=True, seed="seed")
def seeded_draw(ctx, seed: int = 3):
    ctx.read("t")
    ctx.sql(f"SELECT setseed({seed} / 10)")
    ctx.write("drawn", "SELECT id, random() AS r FROM t ORDER BY id LIMIT 5")
"""


def test_a_step_whose_sql_draws_at_random_is_told_which_query_draws(write_pipeline, twicerun):
    """One thread did not stop these steps differing, and the report said only that it does
    not guess among what is left. Their SQL says it: random() and a sample without a seed
    hand out other values every execution. Seeded draws (a sample's seed, setseed before
    random()) are not named, and they did not differ."""
    path = write_pipeline(DRAWS_IN_SQL)
    steps = by_name(twicerun("run", path, "--runs", "3", "--no-amplify", "--json", "-").json())
    for name, query in (
        ("shuffled_top", "SELECT id FROM t ORDER BY random() LIMIT 10"),
        ("sampled", "SELECT id FROM t USING SAMPLE 10 ROWS"),
        # Built with the relation API: the query DuckDB renders for it, which is this on
        # DuckDB 2 (1.x renders the view's rows inline, and the quote ends the same way).
        ("shuffled_by_relation", 'SELECT * FROM "t" ORDER BY random() LIMIT 10'),
    ):
        assert steps[name]["cause"] == "PERSISTS_SINGLE_THREADED"
        (note,) = steps[name]["notes"]
        head = "its SQL draws at random and nothing in the step seeds the draw: "
        rendered = name == "shuffled_by_relation" and duckdb.__version__.startswith("1.")
        quoted = note[len(head) :].split("; random(), ")[0]
        assert note.startswith(head)
        assert quoted.endswith(" ORDER BY random() LIMIT 10") if rendered else quoted == query
        assert note == (
            f"{head}{quoted}; "
            "random(), the uuid functions and a sample without a seed give other values in "
            "every execution, at any thread count (a draw meant to happen is declared with "
            "@step(stochastic=True, seed=...) and seeded from it, by setseed() or the "
            "sample's seed; the uuid functions take no seed, and an id meant to stay is "
            "derived from the row, md5(key)::UUID for one)"
        )
    for name in ("sampled_with_a_seed", "seeded_draw"):
        assert (steps[name]["fired"], steps[name]["notes"]) == (0, [])


def test_a_draw_is_named_when_only_an_amplifier_saw_it_differ_or_one_thread_did_not(
    write_pipeline, twicerun
):
    """A sample of a few hundred rows is all or nothing, so the loop's runs can agree on it,
    and an amplifier's runs then differ: the report blamed the stress alone; or the bisect's
    few runs at one thread agree on it, and the report said PARALLEL_ORDER and no more.
    Made repeatable here: the draw happens only once the input has more rows than it has,
    and only at more than one thread."""
    path = write_pipeline(
        """
        from twicerun import step


        def load(ctx):
            ctx.write("t", "SELECT range AS id FROM range(600)")


        def drawn_when_large(ctx):
            ctx.read("t")
            ctx.write(
                "drawn",
                "SELECT id, CASE WHEN (SELECT count(*) FROM t) > 1000 THEN random() ELSE 0 END "
                "AS r FROM t",
            )


        def drawn_at_two_threads(ctx):
            ctx.read("t")
            r = "random()" if ctx.threads > 1 else "0"
            ctx.write("drawn2", f"SELECT id, {r} AS r FROM t")


        @step(stochastic=True, seed="seed")
        def seeded_but_sampled(ctx, seed: int = 7):
            ctx.read("t")
            ctx.sql(f"SELECT setseed({seed} / 100)")
            ctx.write("sampled", "SELECT id FROM t USING SAMPLE 100%")


        @step(stochastic=True, seed="seed")
        def seeded(ctx, seed: int = 7):
            ctx.read("t")
            ctx.sql(f"SELECT setseed({seed} / 100)")
            ctx.write("seeded", "SELECT id, random() < 2 AS kept FROM t")
        """
    )
    steps = twicerun("run", path, "--amplify", "--threads", "2", "--json", "-").json()["steps"]
    assert [(s["fired"], s["status"], s["cause"]) for s in steps[1:3]] == [
        (0, "STABLE_ON_THIS_INPUT", None),
        (4, "DIVERGENT", "PARALLEL_ORDER"),
    ]
    assert steps[2]["notes"][0].endswith(
        "; the bisect's runs agreeing does not clear it, since a draw that is all or nothing "
        "(a sample of a few hundred rows) agrees by chance in a few runs"
    )
    assert [[note.split(";")[0] for note in s["notes"]] for s in steps[1:]] == [
        [
            "its SQL draws at random and nothing in the step seeds the draw: SELECT id, CASE "
            "WHEN (SELECT count(*) FROM t) > 1000 THEN random() ELSE 0 END AS r FROM t"
        ],
        ["its SQL draws at random and nothing in the step seeds the draw: SELECT id, random() "
         "AS r FROM t"],
        ["its SQL draws at random and nothing in the step seeds the draw: SELECT id FROM t "
         "USING SAMPLE 100%"],
        [],
    ]  # fmt: skip
    # Quiet, and seeded: the seed does not reach the sample, and the note says what does not.
    assert [(s["status"], s["seed"]) for s in steps[3:]] == [("NO_DIVERGENCE_OBSERVED", 7)] * 2
