"""The request deadline's watchdog: one thread fires the deadline of every exchange in flight,
instead of a thread started for each request."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from django_orders.client import reading

from .conftest import ok

ORDER = {"id": "or_1", "status": "paid", "customer": {"id": "cu_1"}}


class FakeConnection:
    """What a ``Deadline`` shuts when it fires: one end of a socket pair."""

    def __init__(self) -> None:
        self.last_sock, self.peer = socket.socketpair()
        self.peer.settimeout(10)

    def close(self) -> None:
        self.last_sock.close()
        self.peer.close()


def wait_until(condition, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > end:
            return False
        time.sleep(0.01)
    return True


def watchdog_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == "django-orders-deadlines"]


def test_one_thread_fires_every_deadline_in_flight_the_soonest_first():
    late, soon = reading.Deadline(1.5), reading.Deadline(0.1)
    connections = []
    # The sooner one comes second: the watchdog, asleep until the later one, must wake for it.
    for deadline in (late, soon):
        deadline.__enter__()
        deadline.connection = FakeConnection()
        connections.append(deadline.connection)
    try:
        assert wait_until(lambda: soon.fired)
        assert not late.fired
        assert connections[1].peer.recv(1) == b""  # its socket was shut down
        assert wait_until(lambda: late.fired)
        assert connections[0].peer.recv(1) == b""
        with pytest.raises(TimeoutError):
            soon.check()
    finally:
        for deadline in (late, soon):
            deadline.__exit__(None, None, None)
        for connection in connections:
            connection.close()
    assert len(watchdog_threads()) == 1


def test_an_exchange_that_ends_takes_its_deadline_out_and_it_never_fires():
    deadline = reading.Deadline(0.05)
    with deadline:
        pass
    assert not any(entry[2] is deadline for entry in reading._WATCHDOG._pending)
    time.sleep(0.2)
    assert not deadline.fired


def test_requests_start_no_thread_of_their_own(api, make_client, monkeypatch):
    api.script("/orders/lookup", *[ok({"order": ORDER})] * 6)
    client = make_client()
    client.lookup_order("or_1")  # the watchdog's thread starts with the first deadline, if not yet
    started: list[str] = []
    original = threading.Thread.start

    def spy(thread):
        started.append(thread.name)
        return original(thread)

    monkeypatch.setattr(threading.Thread, "start", spy)
    for _ in range(5):
        client.lookup_order("or_1")
    assert started == []
    assert len(watchdog_threads()) == 1


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_fires_deadlines_with_a_watchdog_of_its_own():
    """A child has none of its parent's threads: without a new watchdog, its deadlines would
    never fire (a request could then hang past REQUEST_DEADLINE)."""
    with reading.Deadline(60):
        pass  # the parent's watchdog thread is running
    pid = os.fork()
    if pid == 0:  # the child: no pytest, no cleanup, just an exit status
        code = 2
        try:
            deadline = reading.Deadline(0.05)
            deadline.__enter__()
            code = 0 if wait_until(lambda: deadline.fired, 10) else 1
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


def test_a_deadline_of_years_does_not_stop_the_others():
    """The watchdog sleeps at most LONGEST_SLEEP at once: Condition.wait refuses a timeout past
    threading.TIMEOUT_MAX, which would have ended the thread, and every deadline with it."""
    far, soon = reading.Deadline(1e10), reading.Deadline(0.1)
    far.__enter__()
    try:
        time.sleep(0.1)  # the watchdog is asleep until the far one
        with soon:
            soon.connection = FakeConnection()
            try:
                assert wait_until(lambda: soon.fired)
            finally:
                soon.connection.close()
    finally:
        far.__exit__(None, None, None)
    assert [t.is_alive() for t in watchdog_threads()] == [True]


@pytest.mark.parametrize("seconds", [float("nan"), float("inf")])
def test_a_deadline_that_is_not_a_finite_number_is_refused(seconds):
    with pytest.raises(ValueError, match="must be a finite number of seconds"):
        reading.Deadline(seconds)


def test_a_watchdog_that_could_not_start_its_thread_tries_again(monkeypatch):
    """A process at its thread limit fails that one exchange, leaving nothing behind; the next
    exchange starts the thread."""
    watchdog = reading._Watchdog()
    monkeypatch.setattr(reading, "_WATCHDOG", watchdog)
    original = threading.Thread.start
    failures = [RuntimeError("can't start new thread")]

    def start(thread):
        if failures:
            raise failures.pop()
        return original(thread)

    monkeypatch.setattr(threading.Thread, "start", start)
    with pytest.raises(RuntimeError), reading.Deadline(0.1):
        pass
    assert watchdog._pending == []
    assert getattr(reading._current, "deadline", None) is None
    deadline = reading.Deadline(0.1)
    with deadline:
        assert wait_until(lambda: deadline.fired)
    assert watchdog._thread is not None and watchdog._thread.is_alive()
