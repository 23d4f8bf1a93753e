"""Telling an interrupt from a crash.

DuckDB turns a Ctrl-C that arrives during a query into `RuntimeError("Query
interrupted")` (measured with DuckDB 2.0.1), so the exception a step raises
cannot say whether the user asked to stop. While the loop runs, SIGINT is noted
here before the usual KeyboardInterrupt is raised, and the runner asks
`requested()` wherever it would otherwise record a failure: an interrupt is
exit 130 and keeps everything, never a crashed step or a failed amplifier.

SIGTERM (what `timeout`, `docker stop` and Kubernetes send) is the same request
made by a program: Python's default let it end the process where it stood,
leaving its invocation `running` until a later one reaped it as killed. For as
long as a command runs (`terminating`), it becomes a KeyboardInterrupt too,
noted as such, so it is cleaned up as Ctrl-C is and the CLI exits 143, the code
a shell gives a process SIGTERM ended.

--step-timeout is the third way a step is stopped (`deadline`): a step that ran too
long crashed, and never counts as an interrupt.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Callable, Iterator

from twicerun.errors import StepTimedOut

_requested = threading.Event()
_terminated = threading.Event()
# The handlers in place before twicerun put its own on a signal, and the pipe its waker
# reads; both for a forked child to drop (_forget_in_child).
_outer: dict[int, object] = {}
_pipe: tuple[int, int] | None = None


def _on_signal(signum, frame) -> None:
    if signum == signal.SIGTERM:
        _terminated.set()
    _requested.set()
    raise KeyboardInterrupt


# What stops the DuckDB work under way (a step's connection's interrupt), for as long as
# it runs (`interruptible`): a signal's handler runs only once the main thread is back in
# Python, and a query run through `execute` does not come back for one
# (bench/interrupt.py), so Ctrl-C waited for the step's query to finish.
_stops: list[Callable[[], None]] = []


@contextlib.contextmanager
def interruptible(stop: Callable[[], None]) -> Iterator[None]:
    """Have `stop` called, from another thread, as soon as SIGINT or SIGTERM arrives."""
    _stops.append(stop)
    try:
        yield
    finally:
        _stops.remove(stop)


def _wake(reader: int, taken: list[int]) -> None:
    """Read the signal numbers Python's own handler writes to the wakeup fd, from any
    thread, at once; for the ones `watching` took, note the request and stop what runs."""
    while data := os.read(reader, 64):
        for number in data:
            if number not in taken:
                continue
            if number == signal.SIGTERM:
                _terminated.set()
            _requested.set()
            for stop in list(_stops):
                with contextlib.suppress(Exception):
                    stop()


@contextlib.contextmanager
def watching() -> Iterator[None]:
    """Note SIGINT and SIGTERM for the duration, and stop the DuckDB work under way when
    one comes (main thread only; elsewhere Python owns no handler)."""
    _requested.clear()
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    taken = [signal.SIGINT]
    # SIGTERM only where no one else has a handler on it (terminating() installs ours).
    if signal.getsignal(signal.SIGTERM) in (signal.SIG_DFL, _on_signal):
        taken.append(signal.SIGTERM)
    previous = {s: signal.signal(s, _on_signal) for s in taken}
    for s, handler in previous.items():
        if handler is not _on_signal:
            _outer[s] = handler
    global _pipe
    reader, writer = os.pipe()
    _pipe = (reader, writer)
    os.set_blocking(writer, False)
    earlier_fd = signal.set_wakeup_fd(writer, warn_on_full_buffer=False)
    waker = threading.Thread(
        target=_wake, args=(reader, [int(s) for s in taken]), daemon=True, name="twicerun-waker"
    )
    waker.start()
    try:
        yield
    finally:
        signal.set_wakeup_fd(earlier_fd)
        _pipe = None
        os.close(writer)  # the waker reads to the end and returns
        waker.join()
        os.close(reader)
        for s, handler in previous.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def terminating() -> Iterator[None]:
    """SIGTERM raises KeyboardInterrupt for the duration, noted for `terminated()`; a
    handler someone else installed (a host program's) is left alone. A command starts
    with no request to stop noted, whatever an earlier one in the process saw."""
    _terminated.clear()
    _requested.clear()
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
    ):
        yield
        return
    signal.signal(signal.SIGTERM, _on_signal)
    _outer[signal.SIGTERM] = signal.SIG_DFL
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)


# Each forking thread's signal mask before _hold_for_fork blocked SIGINT and SIGTERM, by
# thread id (the child's one thread keeps its parent thread's id).
_masks_before_fork: dict[int, set[signal.Signals]] = {}


def _ours() -> bool:
    return any(signal.getsignal(s) is _on_signal for s in (signal.SIGINT, signal.SIGTERM))


def _hold_for_fork() -> None:
    """Before a fork, block SIGINT and SIGTERM in the forking thread, while twicerun's
    handler is on them. The child starts with that mask and with twicerun's handler; a
    signal sent to it before _forget_in_child puts its own handlers back (a pool that
    has already finished its map terminates a worker that is still starting) used to
    reach twicerun's handler: that wrote it into the pipe twicerun's waker reads, and,
    the handler gone by the time Python looked, the child lived on. Such a worker then
    waited for ever on a queue its pool had let go of (`twicerun audit` hung in about
    one run in a hundred). Blocked, the signal waits for the child's own handlers."""
    with contextlib.suppress(ValueError, OSError):
        if _ours():
            _masks_before_fork[threading.get_ident()] = signal.pthread_sigmask(
                signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM}
            )


def _release(mask: set[signal.Signals] | None) -> None:
    """Put the thread's signal mask back as it was before the fork."""
    if mask is not None:
        with contextlib.suppress(ValueError, OSError):
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)


def _after_fork_in_parent() -> None:
    _release(_masks_before_fork.pop(threading.get_ident(), None))


def _forget_in_child() -> None:
    """In a process a step forks (a `multiprocessing` pool's worker), give the signals back
    to what they were before twicerun and let go of the waker's pipe. The child inherits
    both, and a pool terminates its workers with SIGTERM on leaving a `with` block: the
    workers' handler wrote the signal into the pipe twicerun's own waker reads, and a
    correct step ended the invocation as terminated, exit 143, with a worker's traceback
    for each. Only then is the mask _hold_for_fork set lifted, so a signal that came in
    the meantime is handled as the child's own handlers would."""
    global _pipe
    _stops.clear()
    with contextlib.suppress(ValueError, OSError):
        if _pipe is not None:
            signal.set_wakeup_fd(-1)
            for fd in _pipe:
                os.close(fd)
        for s in (signal.SIGINT, signal.SIGTERM):
            if signal.getsignal(s) is _on_signal:
                signal.signal(s, _outer.get(s, signal.SIG_DFL))
    _pipe = None
    mask = _masks_before_fork.pop(threading.get_ident(), None)
    _masks_before_fork.clear()
    _release(mask)


os.register_at_fork(
    before=_hold_for_fork,
    after_in_parent=_after_fork_in_parent,
    after_in_child=_forget_in_child,
)


def requested() -> bool:
    return _requested.is_set()


def terminated() -> bool:
    """Whether the interrupt being handled came from SIGTERM."""
    return _terminated.is_set()


def reraise_if_requested(exc: BaseException) -> None:
    """Raise KeyboardInterrupt in place of `exc` when the user asked to stop."""
    if requested() and not isinstance(exc, KeyboardInterrupt):
        raise KeyboardInterrupt from exc


_timed_out: StepTimedOut | None = None


@contextlib.contextmanager
def deadline(seconds: float | None, stop: Callable[[], None], grace: float) -> Iterator[None]:
    """Stop the code inside once `seconds` have passed.

    First `stop` (the step's engine stopping its query: DuckDB's connection interrupt,
    Spark's job cancellation) is called from a timer thread: it stops a query that a
    signal does not reach (docs/runs.md has the measurement), and the query comes back as
    a failed one; `timed_out()` says it was this. Code that has
    not come back within `grace` (a sleep, a loop in Python) is then sent SIGALRM, whose
    handler raises StepTimedOut where it stands, as Ctrl-C would; only then, since an
    exception raised at any line can land in cleanup code. The timer is joined before
    the block's caller goes on, so nothing of it outlives the step. Main thread only;
    elsewhere, and with no `seconds`, nothing is watched."""
    global _timed_out
    _timed_out = None
    if seconds is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    main = threading.main_thread().ident
    finished = threading.Event()

    def expire() -> None:
        global _timed_out
        _timed_out = StepTimedOut(seconds)
        with contextlib.suppress(Exception):
            stop()
        if not finished.wait(grace):
            signal.pthread_kill(main, signal.SIGALRM)

    def on_alarm(_signum, _frame) -> None:
        # Not once the step is over: an alarm sent as it ended must not land after it.
        if not finished.is_set() and _timed_out is not None:
            raise _timed_out

    previous = signal.signal(signal.SIGALRM, on_alarm)
    timer = threading.Timer(seconds, expire)
    timer.daemon = True
    timer.name = "twicerun-deadline"  # not a thread of the step's (runner/own_workers.py)
    timer.start()
    try:
        yield
    finally:
        finished.set()
        timer.cancel()
        # Its signal, if it sent one, is delivered before the handler goes back.
        timer.join()
        signal.signal(signal.SIGALRM, previous)


def timed_out() -> StepTimedOut | None:
    """The timeout that stopped the last step run under `deadline`, if one did."""
    return _timed_out
