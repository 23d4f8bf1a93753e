"""The reference pipeline on Apache Spark: Spark's usual ways of giving two answers.

Run with `twicerun run pipelines/spark_reference.py` (needs pip install
'twicerun[spark]' and Java 17+). Planted, one per step, each fixed by one line in
`pipelines/spark_twins.py`:

- `sample_events`: `sample()` without a seed draws other rows every run;
- `number_rows`: `monotonically_increasing_id()` numbers rows by partition, so the
  ids move when the work is split differently;
- `collect_baskets`: `collect_list` keeps the order rows arrived in;
- `preview_rows`: `LIMIT` without `ORDER BY` keeps whichever rows came first;
- `total_amounts`: a float `sum` adds in an order set by the partitioning.

Beside them: `count_events` (a control, order-free), `exact_totals` (a correct
float step: it adds each group's amounts in sorted order, so the partitioning
cannot change the order of the additions) and `basket_sizes` (downstream of
`collect_baskets`, order-free, so containment keeps it at zero).
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


def sample_events(ctx):
    ctx.write("sampled", ctx.read("events").sample(fraction=0.05))


def number_rows(ctx):
    ctx.read("events")
    ctx.write("numbered", "SELECT id, monotonically_increasing_id() AS row_id FROM events")


def collect_baskets(ctx):
    ctx.read("events")
    ctx.write("baskets", "SELECT grp, collect_list(id) AS ids FROM events GROUP BY grp")


def preview_rows(ctx):
    ctx.read("events")
    ctx.write("preview", "SELECT id, grp FROM events LIMIT 50")


def total_amounts(ctx):
    ctx.read("events")
    ctx.write("totals", "SELECT grp, sum(amount) AS total FROM events GROUP BY grp")


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
