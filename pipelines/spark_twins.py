"""`pipelines/spark_reference.py` with each planted bug fixed by one line.

Every step here should agree with itself in the loop and under every amplifier;
one that does not is a false alarm, and the eval counts them.
"""

ENGINE = "spark"

EVENTS = 20_000
GROUPS = 200


def make_inputs(ctx):
    ctx.write(
        "events",
        f"""
        SELECT id,
               CAST(abs(hash(id, 1)) % {GROUPS} AS BIGINT) AS grp,
               CAST(abs(hash(id, 2)) % 1000 AS DOUBLE) / 7.0
                 * power(10, CAST(abs(hash(id, 3)) % 12 AS INT) - 6) AS amount
        FROM range({EVENTS})
        """,
    )


def count_events(ctx):
    ctx.read("events")
    ctx.write("event_counts", "SELECT grp, count(*) AS n FROM events GROUP BY grp")


def sample_events_hashed(ctx):
    # Which rows are kept is a function of the row, not of a draw or of the partitioning.
    ctx.write("sampled", ctx.read("events").where("abs(hash(id, 20261201)) % 20 = 0"))


def number_rows_ordered(ctx):
    ctx.read("events")
    ctx.write("numbered", "SELECT id, row_number() OVER (ORDER BY id) AS row_id FROM events")


def collect_baskets_sorted(ctx):
    ctx.read("events")
    ctx.write("baskets", "SELECT grp, array_sort(collect_list(id)) AS ids FROM events GROUP BY grp")


def preview_rows_ordered(ctx):
    ctx.read("events")
    ctx.write("preview", "SELECT id, grp FROM events ORDER BY id LIMIT 50")


def total_amounts_decimal(ctx):
    ctx.read("events")
    ctx.write(
        "totals",
        "SELECT grp, sum(CAST(amount AS DECIMAL(38, 12))) AS total FROM events GROUP BY grp",
    )


def exact_totals(ctx):
    ctx.read("events")
    ctx.write(
        "sorted_totals",
        """
        SELECT grp, aggregate(array_sort(collect_list(amount)), CAST(0 AS DOUBLE),
                              (acc, x) -> acc + x) AS total
        FROM events GROUP BY grp
        """,
    )


def basket_sizes(ctx):
    ctx.read("baskets")
    ctx.write("basket_sizes", "SELECT grp, size(ids) AS n FROM baskets")
