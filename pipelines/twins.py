"""The reference pipeline with each bug fixed by one line: what twicerun must leave quiet.

Each twin differs from its partner in `reference.py` by the line marked `# fix:`.
The inputs are the reference's own `make_inputs`, listed in STEPS rather than
copied, so both pipelines read the same rows. `average_basket` has no twin:
it is correct code already, and under the strict policy its float drift is a
finding by design.
"""

from reference import make_inputs, summarise_key_batches


def revenue_by_day_decimal(ctx):
    ctx.read("orders")
    ctx.write(
        "daily_revenue",
        "SELECT day, sum(amount::DECIMAL(18, 2)) AS revenue FROM orders GROUP BY day",  # fix:
    )


def assign_customer_keys_tiebreak(ctx):
    ctx.read("events")
    ctx.write(
        "customer_keys",
        "SELECT event_id, customer, "
        "row_number() OVER (ORDER BY customer, event_id) AS surrogate_id "  # fix:
        "FROM events",
    )


def merge_price_updates_deduped(ctx):
    ctx.read("product_prices")
    ctx.read("price_updates")
    ctx.state("prices", "SELECT product_id, price_cents FROM product_prices")
    ctx.sql("CREATE TABLE merged AS SELECT * FROM prices")
    ctx.sql(
        """
        MERGE INTO merged
        USING (SELECT * FROM price_updates
               QUALIFY row_number() OVER (PARTITION BY product_id ORDER BY update_seq DESC) = 1) AS u
        ON merged.product_id = u.product_id
        WHEN MATCHED THEN UPDATE SET price_cents = u.price_cents
        WHEN NOT MATCHED THEN INSERT (product_id, price_cents) VALUES (u.product_id, u.price_cents)
        """  # fix: the source keeps one update per product, the latest
    )
    ctx.write("prices", "SELECT product_id, price_cents FROM merged")


def append_new_audit_entries(ctx):
    ctx.read("audit_entries")
    ctx.state("audit_log", "SELECT * FROM audit_entries WHERE false")
    ctx.write(
        "audit_log",
        "SELECT * FROM audit_log UNION ALL SELECT * FROM audit_entries "
        "WHERE entry_id NOT IN (SELECT entry_id FROM audit_log)",  # fix:
    )


def assign_sparse_keys_tiebreak(ctx):
    ctx.read("sparse_events")
    ctx.write(
        "sparse_customer_keys",
        "SELECT event_id, customer, "
        "row_number() OVER (ORDER BY customer, event_id) AS surrogate_id "  # fix:
        "FROM sparse_events",
    )


STEPS = [
    make_inputs,
    revenue_by_day_decimal,
    assign_customer_keys_tiebreak,
    merge_price_updates_deduped,
    append_new_audit_entries,
    assign_sparse_keys_tiebreak,
    summarise_key_batches,
]
