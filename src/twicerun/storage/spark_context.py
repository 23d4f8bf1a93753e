"""The `ctx` a step receives on Apache Spark, and the Spark application steps run in.

Everything after a step (digests, the oracle, the Result) reads Parquet files and
never learns which engine wrote them, so this is the only place Spark appears.

One Spark application per invocation (`local[N]` by default, started and stopped
here; or a cluster's master URL), and a new session over it for every step
execution, so temporary views and SQL settings never outlive the step
(`SparkSession.newSession`). The parallelism in force, `ctx.threads`, is the
number of shuffle partitions and the number of partitions each artifact is
read into: the bisect's "one thread" is one task, and the thread-count
amplifier changes how the work is split by changing this number.

An artifact is read into partitions that are consecutive stretches of its file,
in file order (range-partitioned on each row's position), so a step sees its
input spread over several tasks, as it would over a real dataset, and the
arrival-order amplifier, which reorders the file, reorders what each task gets.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import duckdb

from twicerun.errors import ContractError, EngineUnavailable, UnknownArtifact
from twicerun.storage.atomic import atomic_path
from twicerun.storage.context import (
    ArtifactRef,
    ContractChecks,
    check_name,
    spark_first_draw,
)
from twicerun.storage.source_files import SOURCE_COPY, checked_files, duckdb_glob, reader_of

# Settings of the Spark context, fixed once it starts: no web UI, and no console
# progress bar, which would draw over twicerun's own progress lines on stderr.
CONTEXT_SETTINGS = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
# Settings every step's session starts from. AQE may still re-plan joins, but it may
# not merge shuffle partitions, so the parallelism twicerun sets is the one in force.
SESSION_SETTINGS = {
    **CONTEXT_SETTINGS,
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
}
POSITION = "__twicerun_position"
LANDING = "__twicerun_partition_key"
_LANDING: dict[int, list[int]] = {}
JAVA_NEEDED = 17
# What in an analyzed plan gives each row the file it was read from.
_ROW_FILES = re.compile(
    r"\b(input_file_name|input_file_block_start|input_file_block_length)\(\)|\b(_metadata)#\d"
)


def java_major() -> int | None:
    """The major version of the `java` on PATH, or None when there is none."""
    java = shutil.which("java")
    return None if java is None else _java_version(java)


@functools.cache
def _java_version(java: str) -> int | None:
    # Once per java binary: a run checks before it starts, then again as Spark starts.
    done = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    found = re.search(r'version "(\d+)(?:\.(\d+))?', done.stderr + done.stdout)
    if not found:
        return None
    major = int(found.group(1))
    return int(found.group(2) or 0) if major == 1 else major


def check_spark(master: str | None = None) -> None:
    """Refuse, in one sentence, when Spark cannot start here: no pyspark, or no Java 17+."""
    try:
        import pyspark  # noqa: F401
    except ImportError as exc:
        raise EngineUnavailable(
            "this pipeline runs on Spark (ENGINE = 'spark' or --engine spark), and pyspark "
            "is not installed; install it with: pip install 'twicerun[spark]'"
        ) from exc
    if master is not None and master.startswith("sc://"):
        return  # Spark Connect: the JVM is the server's
    major = java_major()
    if major is None or major < JAVA_NEEDED:
        found = "no java on PATH" if major is None else f"Java {major} on PATH"
        raise EngineUnavailable(
            f"Spark needs Java {JAVA_NEEDED} or newer and this machine has {found}; "
            f"install a JDK {JAVA_NEEDED}+ and put its java on PATH (or set JAVA_HOME)"
        )


# Spark's log configuration for a JVM twicerun starts: errors only, as the context is set
# to once it exists. Without it the JVM starts on Spark's default profile and prints half
# a dozen WARN lines (and a note that it is using the default) before the report. The
# gateway's logger is named too: pyspark's driver counts as a shell, and a shell whose own
# logger has no level set prints two lines on how to change the level.
_LOG4J2 = """\
rootLogger.level = error
rootLogger.appenderRef.stderr.ref = stderr
appender.stderr.type = Console
appender.stderr.name = stderr
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


@contextlib.contextmanager
def _quiet_start(directory: str | None) -> Iterator[None]:
    """While the driver JVM starts, point its log4j2 at _LOG4J2, through SPARK_SUBMIT_OPTS,
    which spark-submit passes to the driver it runs. A user's own -D in that variable comes
    after ours and wins; so does a log4j2.properties in a SPARK_CONF_DIR they set, which is
    left alone. The variable is restored once the JVM is up."""
    if directory is None or os.environ.get("SPARK_CONF_DIR"):
        yield
        return
    config = Path(directory) / "twicerun-log4j2.properties"
    config.write_text(_LOG4J2, encoding="utf-8")
    before = os.environ.get("SPARK_SUBMIT_OPTS")
    os.environ["SPARK_SUBMIT_OPTS"] = " ".join(
        [f"-Dlog4j2.configurationFile={config}", *([before] if before else [])]
    )
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SPARK_SUBMIT_OPTS", None)
        else:
            os.environ["SPARK_SUBMIT_OPTS"] = before


# PySpark logs every SQL error it converts to stderr, as a line of JSON carrying the JVM's
# whole stack trace, before the step even sees the exception (and when the step catches it).
# twicerun reports a step's error itself, in one sentence with the step and its line.
_PYSPARK_ERROR_LOGGERS = ("SQLQueryContextLogger", "DataFrameQueryContextLogger")


def _mute_pyspark_error_logs() -> None:
    try:
        from pyspark.logger import PySparkLogger
    except ImportError:  # a PySpark without structured logging logs none of this
        return
    for name in _PYSPARK_ERROR_LOGGERS:
        # Through PySparkLogger: a plain Logger made first under that name would be handed
        # back to PySpark, which logs to it with keywords a plain Logger refuses.
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)


@contextlib.contextmanager
def _starting(master: str | None) -> Iterator[None]:
    """A Spark that would not start (a master that is down or unreachable, a Connect server
    that refused) is one sentence and exit 2, not a Py4J traceback from an internal error."""
    try:
        yield
    except (Exception, SystemExit) as exc:
        # SystemExit too: PySpark's Connect client exits the process, with status 0, when
        # __main__ looks like a doctest runner's and its packages are missing. Passed on,
        # that would end a check green with nothing measured.
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
        # Py4J puts the Java exception on the line after "An error occurred while calling".
        reason = next(
            (line[2:] for line in lines if line.startswith(": ")), lines[0] if lines else ""
        )
        where = master or "local mode"
        if isinstance(exc, ImportError):
            # Spark Connect's client needs packages the `spark` extra does not bring.
            raise EngineUnavailable(
                f"Spark did not start on {where}: {reason[:300].rstrip('. ')}; Spark Connect's client "
                f"needs pyspark's connect extra, pip install 'pyspark[connect]'"
            ) from exc
        failed = f"Spark did not start on {where} ({type(exc).__name__}: {reason[:300]})"
        error = EngineUnavailable(
            f"{failed}; check that the master is running and reachable from this machine"
            + (", or leave out --spark-master to run in local mode" if master else "")
        )
        # The sentence without its advice, for a caller whose master came from elsewhere.
        error.failed = failed
        raise error from exc


class SparkEngine:
    """The Spark application of one invocation, handing a fresh session to each step."""

    name = "spark"

    def __init__(self, threads: int, master: str | None = None):
        check_spark(master)
        from pyspark.sql import SparkSession

        self._remote = master is not None and master.startswith("sc://")
        self._warehouse: str | None = None
        builder = SparkSession.builder.appName("twicerun")
        for key, value in SESSION_SETTINGS.items():
            # A Connect server's context is its own: a client that sets these gets a
            # warning on stderr ("Cannot modify the value of the Spark config") per session.
            if not (self._remote and key in CONTEXT_SETTINGS):
                builder = builder.config(key, value)
        self._builder = builder
        if self._remote:
            self.master = master
            with _starting(master):
                self._base = builder.remote(master).getOrCreate()
            self._owned = True
        else:
            from pyspark import SparkContext

            # A context already running in this process (a notebook's, a test suite's)
            # is used as it is and left running; one started here is stopped here.
            self._owned = SparkContext._active_spark_context is None
            builder = builder.master(master or f"local[{threads}]")
            if self._owned and (master is None or master.startswith("local")):
                # Spark starts its Python workers with PYSPARK_PYTHON, or else whatever
                # `python3` is first on PATH: another interpreter when twicerun runs from a
                # venv that is not activated, and a minor version apart every step that
                # runs Python on the workers fails. Local workers can run this one.
                os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            if self._owned:
                # Python workers start as `python -m pyspark.daemon` in this process's working
                # directory, which -m puts first on their path: a project whose root holds a
                # types.py or random.py had it imported in place of the standard one, and
                # every Python UDF failed. Nothing a worker runs is imported from there: a
                # pipeline's own code is pickled by value.
                builder = builder.config("spark.executorEnv.PYTHONSAFEPATH", "1")
                # Spark's default warehouse is ./spark-warehouse, made in whatever directory
                # twicerun was started from; nothing here keeps tables in it.
                self._warehouse = tempfile.mkdtemp(prefix="twicerun-spark-warehouse-")
                builder = builder.config("spark.sql.warehouse.dir", self._warehouse)
            builder = builder.config("spark.sql.shuffle.partitions", threads)
            try:
                with _starting(master), _quiet_start(self._warehouse):
                    self._base = builder.getOrCreate()
            except EngineUnavailable:
                if self._warehouse:
                    shutil.rmtree(self._warehouse, ignore_errors=True)
                raise
            self._base.sparkContext.setLogLevel("ERROR")
            self.master = self._base.sparkContext.master
        self.version = self._base.version
        _mute_pyspark_error_logs()

    def context(self, threads: int, **bound: Any) -> SparkStepContext:
        # Spark Connect has no newSession; a new remote session is as fresh.
        session = (
            self._builder.remote(self.master).create() if self._remote else self._base.newSession()
        )
        for key, value in SESSION_SETTINGS.items():
            if key not in CONTEXT_SETTINGS:
                session.conf.set(key, value)
        session.conf.set("spark.sql.shuffle.partitions", str(threads))
        return SparkStepContext(session=session, threads=threads, **bound)

    def expect(self, threads: int, count: int) -> None:
        """Nothing is opened ahead here: a new session costs next to nothing."""

    def warm(self, threads: int) -> None:
        """Nothing to open ahead (above)."""

    def release(self, ctx: SparkStepContext) -> None:
        # Cached tables live in the application, not the session: drop the step's.
        with contextlib.suppress(Exception):
            ctx.session.catalog.clearCache()
        if self._remote:
            # A remote session of its own per execution: released on the server and its
            # channel closed here. Left to the garbage collector, the channels were closed
            # at exit, where closing one waits forever: the report was out, and the
            # process never ended.
            with contextlib.suppress(Exception):
                ctx.session.stop()

    def shutdown(self) -> None:
        if self._owned:
            with contextlib.suppress(Exception):
                self._base.stop()
            if self._warehouse:
                shutil.rmtree(self._warehouse, ignore_errors=True)


class SparkStepContext(ContractChecks):
    """The `ctx` of one execution of one step, on a Spark session of its own."""

    OFFERS = (*ContractChecks.OFFERS, "spark")
    _first_draw = staticmethod(spark_first_draw)

    # A job Spark cancelled comes back within a fraction of a second in local mode; a signal
    # landing in the middle of a py4j call could leave its connection with an answer
    # nobody read, so the signal waits much longer here than on DuckDB.
    _stop_grace = 10.0

    def __init__(self, *, session: Any, **bound: Any):
        super().__init__(**bound)
        self.session = session

    def _interrupt(self) -> None:
        """Cancel the step's jobs (--step-timeout), on the cluster as well as the driver:
        steps run one at a time, so every job running is this step's."""
        try:
            context = self.session.sparkContext
        except Exception:
            # Spark Connect has no SparkContext in the client; the session interrupts its own.
            self.session.interruptAll()
            return
        context.cancelAllJobs()

    @property
    def threads(self) -> int:
        """The parallelism in force: shuffle partitions, and partitions per artifact read."""
        return self._threads

    @property
    def spark(self) -> Any:
        """This step's SparkSession, for the DataFrame API."""
        return self.session

    def _split(self, ref: ArtifactRef) -> Any:
        """The file as `threads` partitions of consecutive rows, in file order, the same
        partitions every time: chunk j of the rows goes to partition j, by a key whose hash
        lands there (range partitioning would sample, with a seed that changes per job)."""
        from pyspark.sql import functions as F

        frame = self.session.read.parquet(_hadoop_file(ref.path))
        if self._threads <= 1:
            return frame.coalesce(1)
        keys = _landing_keys(self.session, self._threads)
        # One task numbers the rows 0..n-1 in file order.
        numbered = frame.coalesce(1).withColumn(POSITION, F.monotonically_increasing_id())
        import pyarrow.parquet as pq

        # The file's own row count, not the caller's record of it: the split must hold
        # whoever describes the artifact.
        rows = pq.read_metadata(ref.path).num_rows
        chunk = F.least(
            F.floor(F.col(POSITION) * self._threads / max(rows, 1)).cast("int"),
            F.lit(self._threads - 1),
        )
        key = F.element_at(F.array(*[F.lit(k) for k in keys]), chunk + 1)
        return (
            numbered.withColumn(LANDING, key)
            .repartition(self._threads, LANDING)
            .drop(POSITION, LANDING)
        )

    def read(self, name: str) -> Any:
        """The artifact `name` of an earlier step as a DataFrame and as the temporary view `name`."""
        check_name(name, "ctx.read", self._where)
        written_as, ref = self._resolve(name)
        if ref is None:
            raise UnknownArtifact(self._unknown_read(name), name=name)
        frame = self._split(ref)
        frame.createOrReplaceTempView(name)
        self._read_record(written_as, ref)
        return frame

    def state(self, name: str, initial: str) -> Any:
        """This step's own `name` as its previous run left it, or the rows of `initial`."""
        self._check_state(name, initial)
        ref = self._state_source(name)
        frame = self._split(ref) if ref is not None else self.session.sql(initial)
        frame.createOrReplaceTempView(name)
        self._state_record(name, ref)
        return frame

    def source(self, name: str, files: Any, **options: Any) -> Any:
        """Files from outside the pipeline (Parquet or CSV) as the view `name`, each recorded."""
        check_name(name, "ctx.source", self._where)
        head = f"ctx.source({name!r}, files) in {self._where}"
        listed = checked_files(head, files, _glob)
        skipped = [path for path in listed if Path(path).name.startswith((".", "_"))]
        if skipped:
            # Spark drops these from a list without a word (and fails to infer a schema when
            # one is read alone), so the receipt would name a file whose rows never arrived.
            raise ContractError(
                f"{head}: Spark does not read a file whose name starts with '.' or '_' (it "
                f"takes it for hidden or metadata), so {skipped[0]} would be left out of the "
                f"rows; rename it, or leave it out of the list"
            )
        reader = reader_of(head, listed)
        order = list(range(len(listed)))
        if self._source_order is not None and len(listed) > 1:
            order = self._source_order(name, len(listed))
        ordered = [listed[i] for i in order]
        copy = self._visible.get(SOURCE_COPY + name)
        try:
            if copy is not None:
                # An amplifier's stressed copy of these rows, read instead of the files and
                # split into tasks as an artifact is; the receipt still names the files.
                frame = self._split(copy)
            else:
                load = self.session.read.options(**{k: str(v) for k, v in options.items()})
                exact = [_hadoop_file(path) for path in ordered]
                frame = load.parquet(*exact) if reader == "parquet" else load.csv(exact)
            rows = frame.count()
        except Exception as exc:
            if type(exc).__module__.startswith(("pyspark", "py4j")):
                raise ContractError(f"{head}: Spark could not read the files: {exc}") from exc
            raise
        frame.createOrReplaceTempView(name)
        self._source_record(name, reader, listed, rows, options, order, frame.columns)
        return frame

    def sql(self, query: str, params: Any = None) -> Any:
        """Spark SQL on this step's session; the DataFrame it returns."""
        self._note_draws(query)
        return self.session.sql(query, args=params) if params else self.session.sql(query)

    def write(self, name: str, data: Any) -> None:
        """Make `data` (a Spark SQL query or a DataFrame) this step's artifact, atomically."""
        final = self._check_write(name, "Spark")
        if isinstance(data, str):
            self._note_draws(data)
            # Only the end is trimmed: Spark numbers an error's line in the text it is
            # given, and a query in triple quotes starts with a line break.
            frame = self.session.sql(data.rstrip().removesuffix(";"))
        elif type(data).__module__.startswith("pyspark.sql"):
            frame = data
        else:
            kind = type(data)
            root = (kind.__module__ or "").split(".")[0]
            got = f"{root}.{kind.__name__}" if root not in ("", "builtins") else kind.__name__
            # "must be a DataFrame, got DataFrame" said nothing to a step holding pandas'.
            made = {"pandas": "df", "pyarrow": "df", "polars": "df.to_arrow()"}.get(root)
            if made is None and hasattr(kind, "__arrow_c_stream__"):
                made = "pyarrow.table(df)"
            advice = (
                f"; make it a Spark one first, ctx.spark.createDataFrame({made})" if made else ""
            )
            raise ContractError(
                f"ctx.write({name!r}, data) in step {self._index} {self._name}: data must be a "
                f"Spark SQL query string or a Spark DataFrame, got {got}{advice}"
            )
        for named in _row_files(frame):
            if named not in self.output.row_files:
                self.output.row_files.append(named)
        # Spark writes a directory of part files; twicerun's artifacts are one file.
        # The parts are joined in their written order through a temporary name, so no
        # reader sees a partial artifact under the final one.
        parts = self._out_dir / f".{name}.spark-parts"
        shutil.rmtree(parts, ignore_errors=True)
        try:
            frame.write.mode("overwrite").parquet(str(parts))
            with atomic_path(final, fsync=False) as temporary:
                _join_parts(parts, temporary)
        finally:
            shutil.rmtree(parts, ignore_errors=True)
        self.output.written[name] = final


def _row_files(frame: Any) -> list[str]:
    """What in the plan of `frame` names the file each row came from (`input_file_name()`,
    `_metadata`), as shown in the report. Spark Connect keeps the plan on the server, so
    there it is never found."""
    try:
        plan = frame._jdf.queryExecution().analyzed().toString()
    except Exception:
        return []
    return sorted(
        {m.group(1) + "()" if m.group(1) else m.group(2) for m in _ROW_FILES.finditer(plan)}
    )


def _landing_keys(session: Any, partitions: int) -> list[int]:
    """For each partition j, a key that hash partitioning sends to j (Spark's hash
    partitioner is SQL's hash() modulo the count), found once per count."""
    if partitions not in _LANDING:
        found: dict[int, int] = {}
        rows = session.sql(
            f"SELECT id, pmod(hash(id), {partitions}) AS lands FROM range({64 * partitions})"
        ).collect()
        for row in rows:
            found.setdefault(row["lands"], row["id"])
        if len(found) < partitions:
            raise RuntimeError(f"no key lands in every one of {partitions} partitions")
        _LANDING[partitions] = [found[j] for j in range(partitions)]
    return _LANDING[partitions]


def _hadoop_file(path: str | Path) -> str:
    """`path` as Spark's readers take exactly that file: they read every path as a Hadoop
    glob, which has braces as well as DuckDB's [ ] * ? (a{1,2}.csv reads a1.csv), and a
    backslash before a character makes it plain."""
    return re.sub(r"([\\{}\[\]*?])", r"\\\1", str(path))


def _join_parts(parts: Path, target: Path) -> None:
    import pyarrow.parquet as pq

    files = sorted(parts.glob("part-*.parquet"))
    schema = pq.read_schema(files[0])
    with pq.ParquetWriter(str(target), schema) as writer:
        for part in files:
            writer.write_table(pq.read_table(part, schema=schema))


def _glob(text: str) -> list[str]:
    """A ctx.source glob on Spark, expanded by DuckDB (see `duckdb_glob`). A database of its
    own costs a few tens of milliseconds, next to the seconds Spark takes to read the files."""
    con = duckdb.connect(":memory:")
    try:
        return duckdb_glob(con, text)
    finally:
        con.close()
