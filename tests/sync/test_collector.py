"""The cyclic garbage collector is held off while a walk writes its pages (a page's records are
freed by reference counting alone) and left as it was found: by one walk, by walks in several
threads at once, and by a walk that fails. Cycles made meanwhile are still freed."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import threading
import weakref

import pytest

from django_orders.services import sync_orders
from django_orders.sync import collector
from django_orders.sync.collector import collector_held_off


@pytest.fixture
def collector_on():
    """The collector on, as a process has it, whatever the test found; restored after."""
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


@pytest.mark.django_db(transaction=True)
def test_the_collector_is_off_while_the_pages_write_and_on_again_after(uncapped, collector_on):
    uncapped.seed(30)
    during: list[bool] = []
    run = sync_orders(page_size=10, progress=lambda run: during.append(gc.isenabled()))
    assert run.created == 30
    assert during and set(during) == {False}
    assert gc.isenabled()


@pytest.mark.django_db(transaction=True)
def test_a_failed_walk_leaves_the_collector_on(uncapped, sleeps, collector_on):
    uncapped.seed(30)
    uncapped.add_fault("html_502", path="/orders/page", times=None)
    with pytest.raises(Exception, match="502"):
        sync_orders(page_size=10)
    assert gc.isenabled()


def test_a_collector_found_off_stays_off(collector_on):
    gc.disable()
    with collector_held_off():
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_walks_in_two_threads_hold_it_off_until_the_last_one_ends(collector_on):
    # The first walk ends while the second still runs: the collector stays off for the second,
    # and is on again only when the second ends (a toggle saved and restored by each walk would
    # leave it off for good in the order first-in, second-in, first-out, second-out).
    second_in, first_out, second_may_end = threading.Event(), threading.Event(), threading.Event()
    seen: dict[str, bool] = {}

    def second() -> None:
        with collector_held_off():
            second_in.set()
            first_out.wait(5)
            seen["second, after the first ended"] = gc.isenabled()
            second_may_end.wait(5)

    with collector_held_off():
        thread = threading.Thread(target=second)
        thread.start()
        assert second_in.wait(5)
    first_out.set()
    seen["first ended, second running"] = gc.isenabled()
    second_may_end.set()
    thread.join(5)
    assert seen == {"second, after the first ended": False, "first ended, second running": False}
    assert gc.isenabled()


def test_a_cycle_made_while_it_is_off_is_freed_between_pages(monkeypatch, collector_on):
    class Node:
        pass

    monkeypatch.setattr(collector, "YOUNG_COLLECTION_INTERVAL", 0.0)
    with collector_held_off() as held:
        node = Node()
        node.self = node  # a cycle: reference counting never frees it
        alive = weakref.ref(node)
        del node
        assert alive() is not None
        held.page_written()
        assert alive() is None


#: Run in a process of its own, with one thread: forking a process with threads (pytest's may
#: have some) is deprecated, and a deadlock in the child would hang the suite.
FORK_DURING_A_WALK = """
import gc, os
from django_orders.sync.collector import collector_held_off
gc.enable()
with collector_held_off():
    pid = os.fork()
    if pid == 0:  # the child: none of the parent's walks run here
        os._exit(0 if gc.isenabled() else 1)
    _, status = os.waitpid(pid, 0)
    assert not gc.isenabled(), "the parent's walk holds it off"
assert gc.isenabled()
print("child", os.waitstatus_to_exitcode(status))
"""


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_child_forked_during_a_walk_has_the_collector_on():
    done = subprocess.run(
        [sys.executable, "-c", FORK_DURING_A_WALK], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["child", "0"]
