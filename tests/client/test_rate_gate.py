"""A 429 to one client of a lookup pool holds every client that shares its gate."""

from __future__ import annotations

import pytest

from django_orders.client.rate_gate import PACING_HEADROOM, REREAD_EVERY, RateGate

from .conftest import error, ok, page_of


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_a_hold_lasts_its_seconds_and_only_grows(clock):
    gate = RateGate(clock=clock)
    assert gate.remaining() == 0.0
    gate.hold(3)
    gate.hold(1)  # a shorter hold does not cut the longer one short
    assert gate.remaining() == 3.0
    clock.now += 2
    assert gate.remaining() == 1.0
    clock.now += 5
    assert gate.remaining() == 0.0


def test_wait_sleeps_out_the_hold_once(clock):
    gate = RateGate(clock=clock)
    slept: list[float] = []
    assert gate.wait(slept.append) == 0.0
    gate.hold(2.5)
    assert gate.wait(slept.append) == 2.5
    assert slept == [2.5]


def rate_limited(retry_after: str):
    return error(429, "rate_limited", "Slow down.", **{"Retry-After": retry_after})


def test_a_429_to_one_client_holds_the_other(api, make_client, clock):
    """Client A is told to wait 3 s; B, sharing the gate, waits before its first request."""
    gate = RateGate(clock=clock)
    a_slept: list[float] = []
    b_slept: list[float] = []
    a = make_client(gate=gate, sleep=a_slept.append)
    b = make_client(gate=gate, sleep=b_slept.append)
    api.script("/orders/page", rate_limited("3"), page_of(1, 5, 1), page_of(1, 5, 2))
    assert len(a.fetch_page("orders", 1, 5).records) == 1
    assert a_slept == [3.0]  # A waited at the gate, not on its own
    # The clock did not move (the sleeps were recorded, not slept): the hold still stands.
    assert len(b.fetch_page("orders", 1, 5).records) == 2
    assert b_slept == [3.0]
    assert len(api.sent) == 3


def test_the_hold_counts_against_max_retries(api, make_client, clock):
    from django_orders.exceptions import RateLimited

    gate = RateGate(clock=clock)
    slept: list[float] = []
    client = make_client(gate=gate, sleep=slept.append, max_retries=2)
    api.script("/orders/page", *[rate_limited("1") for _ in range(3)])
    with pytest.raises(RateLimited):
        client.fetch_page("orders", 1, 5)
    assert len(api.sent) == 3  # 1 + max_retries
    assert slept == [1.0, 1.0]
    # The last 429 is not retried, but it still holds the pool (and, shared, everyone).
    assert gate.rate_limited == 3
    assert gate.remaining() == 1.0


def test_server_errors_are_not_shared(api, make_client, clock, sleeps):
    """A 5xx is one client's trouble: it backs off alone and the gate stays open."""
    gate = RateGate(clock=clock)
    client = make_client(gate=gate)
    api.script("/orders/lookup", error(503, "busy", "Busy."), ok({"order": {"id": "or_1"}}))
    assert client.lookup_order("or_1") == {"id": "or_1"}
    assert len(sleeps) == 1
    assert gate.remaining() == 0.0


def test_without_a_gate_a_429_is_the_clients_own_wait(api, make_client, sleeps):
    api.script("/orders/page", rate_limited("2"), page_of(1, 5, 0))
    make_client().fetch_page("orders", 1, 5)
    assert sleeps == [2.0]


# --- a hold shared beyond the process (SharedHold), and the rate -------------------------------


class FakeShared:
    """A ``SharedHold`` in memory, on the wall clock the gate is given."""

    def __init__(self, wall: FakeClock) -> None:
        self.wall = wall
        self.until = 0.0
        self.next_slot = 0.0
        self.reads = 0
        self.takes: list[tuple[int, float]] = []

    def held_until(self) -> float:
        self.reads += 1
        return self.until

    def hold_until(self, until: float) -> None:
        self.until = max(self.until, until)

    def take_slots(self, count: int, interval: float) -> float:
        self.takes.append((count, interval))
        first = max(self.next_slot, self.wall())
        self.next_slot = first + count * interval
        return first


class Sleeper:
    """Sleeps by moving the fake clocks on (both: monotonic and wall)."""

    def __init__(self, *clocks: FakeClock) -> None:
        self.clocks = clocks
        self.slept: list[float] = []

    def __call__(self, seconds: float) -> None:
        self.slept.append(seconds)
        for clock in self.clocks:
            clock.now += seconds


@pytest.fixture
def wall() -> FakeClock:
    clock = FakeClock()
    clock.now = 1_800_000_000.0
    return clock


def test_the_shared_hold_is_read_before_the_first_request_and_every_fifth(clock, wall):
    shared = FakeShared(wall)
    gate = RateGate(shared=shared, clock=clock, wall_clock=wall)
    reads = []
    for _ in range(2 * REREAD_EVERY + 1):
        gate.wait(Sleeper(clock, wall))
        reads.append(shared.reads)
    assert reads == [1] * REREAD_EVERY + [2] * REREAD_EVERY + [3]


def test_a_hold_written_by_another_process_is_slept_out(clock, wall):
    shared = FakeShared(wall)
    shared.until = wall.now + 2.5  # another process met a 429
    gate = RateGate(shared=shared, clock=clock, wall_clock=wall)
    sleep = Sleeper(clock, wall)
    assert gate.wait(sleep) == 2.5
    assert gate.wait(sleep) == 0.0  # passed
    assert gate.held_seconds == 2.5 and gate.rate_limited == 0  # the 429 was not this gate's


def test_a_429_is_written_to_the_shared_hold_and_counted(clock, wall):
    shared = FakeShared(wall)
    gate = RateGate(shared=shared, clock=clock, wall_clock=wall)
    gate.hold(2)
    gate.hold(1)
    assert shared.until == wall.now + 2
    assert gate.rate_limited == 2


def test_a_rate_paces_requests_one_interval_apart(clock, wall):
    gate = RateGate(rate=10, clock=clock, wall_clock=wall)
    sleep = Sleeper(clock, wall)
    started = clock.now
    sent = []
    for _ in range(7):
        gate.wait(sleep)
        sent.append(round(clock.now - started, 6))
    # 1/rate apart, widened by the headroom (PACING_HEADROOM).
    interval = 1 / (10 * PACING_HEADROOM)
    assert sent == [round(n * interval, 6) for n in range(7)]
    assert gate.paced_seconds == pytest.approx(6 * interval)


def test_shared_slots_are_taken_a_quarter_second_at_a_time(clock, wall):
    shared = FakeShared(wall)
    shared.next_slot = wall.now + 1.0  # other processes took the next second
    gate = RateGate(shared=shared, rate=20, clock=clock, wall_clock=wall)
    sleep = Sleeper(clock, wall)
    gate.wait(sleep)
    # A quarter second of slots at 20 a second, each 1/rate apart and the headroom.
    assert shared.takes == [(5, pytest.approx(1 / (20 * PACING_HEADROOM)))]
    assert sleep.slept == [pytest.approx(1.0)]
    for _ in range(5):
        gate.wait(sleep)
    assert len(shared.takes) == 2  # the sixth request took a second block
    assert shared.next_slot == pytest.approx(wall.now + 4 / (20 * PACING_HEADROOM))


def test_slots_left_from_an_idle_spell_are_dropped(clock, wall):
    gate = RateGate(rate=10, clock=clock, wall_clock=wall)
    sleep = Sleeper(clock, wall)
    gate.wait(sleep)  # takes two slots (a quarter second's worth, rounded)
    clock.now += 5  # idle: the slots left belong to a window long gone
    before = clock.now
    for _ in range(3):
        gate.wait(sleep)
    # Not three at once on the stale slots: paced again from now.
    assert round(clock.now - before, 6) == round(2 / (10 * PACING_HEADROOM), 6)


class BrokenShared(FakeShared):
    def held_until(self) -> float:
        raise ConnectionError("the database is down")

    def hold_until(self, until: float) -> None:
        raise ConnectionError("the database is down")

    def take_slots(self, count: int, interval: float) -> float:
        raise ConnectionError("the database is down")


def test_a_failing_shared_hold_leaves_the_gate_to_itself(clock, wall, caplog):
    gate = RateGate(shared=BrokenShared(wall), rate=10, clock=clock, wall_clock=wall)
    sleep = Sleeper(clock, wall)
    gate.hold(1)
    assert gate.wait(sleep) == pytest.approx(1.0)  # its own hold, then its own pacing
    gate.wait(sleep)
    assert sleep.slept[-1] == pytest.approx(1 / (10 * PACING_HEADROOM))
    assert "this process goes on alone" in caplog.text
    assert "ConnectionError" in caplog.text
    # After a failure the store is left alone for a while: one warning, not one a request.
    for _ in range(5):
        gate.wait(sleep)
    assert caplog.text.count("this process goes on alone") == 1


def test_a_rate_must_be_positive():
    with pytest.raises(ValueError, match="rate must be a positive number"):
        RateGate(rate=0)
