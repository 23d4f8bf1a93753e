"""The reference pipeline: eight steps, four planted bugs, and what a checker must tell apart.

    0 make_inputs            the control: writes every input from hash(i); must never fire
    1 revenue_by_day         bug: sum() over DOUBLE, whose answer depends on the order
                             parallel threads add in
    2 assign_customer_keys   bug: row_number() over a sort with 500 rows per tie, so which
                             event gets which key depends on arrival order
    3 merge_price_updates    bug: MERGE whose source repeats a product, so which update wins
                             depends on thread scheduling (and the merge reads its own
                             previous output through ctx.state)
    4 append_audit_log       bug: appends the same entries again on every rerun; one thread
                             does not help, because a rerun is the cause
    5 average_basket         correct code: a float average that moves in its last bits
    6 assign_sparse_keys     step 2's bug at two rows per tie, where it fires only sometimes
    7 summarise_key_batches  correct integer roll-up that reads step 2's keys: fires only
                             when containment is off and step 2's difference reaches it

Inputs come from hash(i), never random(), so every run reads the same rows.
`pipelines/twins.py` is the same pipeline with each bug fixed by one line.
"""

ORDERS = 2_000_000
DAYS = 1_000
CUSTOMERS = 1_000
EVENTS = 500_000
SPARSE_EVENTS = 400_000
SPARSE_CUSTOMERS = 200_000  # two events per customer: few ties, so it fires only sometimes
PRODUCTS = 500_000
PRICE_UPDATES = 500_000
AUDIT_ENTRIES = 4_000


def make_inputs(ctx):
    ctx.write(
        "orders",
        f"""
        SELECT i AS order_id,
               i % {DAYS} AS day,
               hash(i) % {CUSTOMERS} AS customer,
               (hash(i * 7 + 3) % 100000) / 100.0 AS amount
        FROM range({ORDERS}) r(i)
        """,
    )
    ctx.write(
        "events",
        f"SELECT i AS event_id, hash(i * 5 + 1) % {CUSTOMERS} AS customer FROM range({EVENTS}) r(i)",
    )
    ctx.write(
        "sparse_events",
        f"""
        SELECT i AS event_id, hash(i * 11 + 2) % {SPARSE_CUSTOMERS} AS customer
        FROM range({SPARSE_EVENTS}) r(i)
        """,
    )
    ctx.write(
        "product_prices",
        f"""
        SELECT i AS product_id, (hash(i * 13 + 4) % 10000)::BIGINT AS price_cents
        FROM range({PRODUCTS}) r(i)
        """,
    )
    ctx.write(
        "price_updates",
        f"""
        SELECT i AS update_seq,
               hash(i * 17 + 5) % {PRODUCTS} AS product_id,
               (hash(i * 19 + 6) % 10000)::BIGINT AS price_cents
        FROM range({PRICE_UPDATES}) r(i)
        """,
    )
    ctx.write(
        "audit_entries",
        f"""
        SELECT i AS entry_id, 'order batch ' || (i // 100) AS message, i % {DAYS} AS day
        FROM range({AUDIT_ENTRIES}) r(i)
        """,
    )


def revenue_by_day(ctx):
    ctx.read("orders")
    ctx.write("daily_revenue", "SELECT day, sum(amount) AS revenue FROM orders GROUP BY day")


def assign_customer_keys(ctx):
    ctx.read("events")
    ctx.write(
        "customer_keys",
        "SELECT event_id, customer, row_number() OVER (ORDER BY customer) AS surrogate_id "
        "FROM events",
    )


def merge_price_updates(ctx):
    ctx.read("product_prices")
    ctx.read("price_updates")
    ctx.state("prices", "SELECT product_id, price_cents FROM product_prices")
    ctx.sql("CREATE TABLE merged AS SELECT * FROM prices")
    ctx.sql(
        """
        MERGE INTO merged
        USING price_updates AS u
        ON merged.product_id = u.product_id
        WHEN MATCHED THEN UPDATE SET price_cents = u.price_cents
        WHEN NOT MATCHED THEN INSERT (product_id, price_cents) VALUES (u.product_id, u.price_cents)
        """
    )
    ctx.write("prices", "SELECT product_id, price_cents FROM merged")


def append_audit_log(ctx):
    ctx.read("audit_entries")
    ctx.state("audit_log", "SELECT * FROM audit_entries WHERE false")
    ctx.write("audit_log", "SELECT * FROM audit_log UNION ALL SELECT * FROM audit_entries")


def average_basket(ctx):
    ctx.read("orders")
    ctx.write(
        "basket_means",
        "SELECT customer, avg(amount) AS mean_amount FROM orders GROUP BY customer",
    )


def assign_sparse_keys(ctx):
    ctx.read("sparse_events")
    ctx.write(
        "sparse_customer_keys",
        "SELECT event_id, customer, row_number() OVER (ORDER BY customer) AS surrogate_id "
        "FROM sparse_events",
    )


def summarise_key_batches(ctx):
    ctx.read("customer_keys")
    ctx.write(
        "key_batches",
        """
        SELECT event_id // 1000 AS batch,
               min(surrogate_id) AS first_key,
               max(surrogate_id) AS last_key,
               count(*) AS events
        FROM customer_keys
        GROUP BY batch
        """,
    )
