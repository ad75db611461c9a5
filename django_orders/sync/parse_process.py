"""Reading a first sync's pages in a helper process, beside the interpreter that writes them.

On a first sync every order is read in full, and in one interpreter that reading holds the
lock the writer needs each time one of its statements returns. Past ``START_AFTER_RECORDS``
records, the parsing thread hands each page's bytes to a helper process running the resource's
``read_apart`` reader and rebuilds the answer; the page is then what reading it on the thread
gives. The helper never touches the database or the network, and holds no secret: it gets a
page's bytes and answers with its records. Anything that keeps it from answering (it cannot
start, it dies, it fails on a page) makes the walk read the page on its thread, as it does
below the threshold: the mirror is the same either way. Why and figures:
docs/architecture/sync.md, "The parsing process".
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pickle
import select
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:  # the helper imports this module without Django's app registry
    from ..mirror.resources.registry import ReadApart, Resource

logger = logging.getLogger("django_orders.sync")

#: Records a first sync reads on its thread before it starts the helper: a small walk (most
#: tests, a shop with few orders) is over before the helper would have started.
START_AFTER_RECORDS = 2_000
#: Seconds the parsing thread waits for a started helper to say it is ready, each page until it
#: has: none, so a walk never waits for it (it reads pages itself meanwhile).
READY_WAIT = 0.0
#: Seconds to wait for a stopped helper to exit before killing it.
STOP_TIMEOUT = 5.0

_HEADER = struct.Struct("!I")

#: What the helper's interpreter runs. The reader's package is stood in for by a bare package:
#: its ``__init__`` may need Django's app registry (the resources registry does), which the
#: helper has not set up and does not need.
BOOTSTRAP = """\
import pickle, sys, types
job = pickle.load(sys.stdin.buffer)
sys.path[:0] = [p for p in job["path"] if p not in sys.path]
name, path = job["package"]
package = types.ModuleType(name)
package.__path__ = [path]
sys.modules[name] = package
from django_orders.sync.parse_process import serve
serve(job["reader"], sys.stdin.buffer, sys.stdout.buffer)
"""


@contextmanager
def pages_apart(kind: Resource, first: bool) -> Iterator[PagesApart | None]:
    """A first sync's helper process for reading ``kind``'s pages, if it has a way to
    (``Resource.read_apart``); stopped when the walk ends, however it ends."""
    if not first or kind.read_apart is None:
        yield None
        return
    apart = PagesApart(kind.read_apart, kind.name)
    try:
        yield apart
    finally:
        apart.close()


class PagesApart:
    """One walk's helper process, started once the walk has read ``START_AFTER_RECORDS``
    records; ``read`` is called by the walk's parsing thread only, ``close`` by the walk."""

    def __init__(self, apart: ReadApart, resource: str) -> None:
        self.apart = apart
        self.resource = resource
        self.records = 0
        self.read_here = 0
        self.read_apart = 0
        self._process: subprocess.Popen | None = None
        self._ready = False
        self._gone = False
        self._lock = threading.Lock()

    def read(self, records: Sequence[Any], page_number: int) -> Any | None:
        """The page read by the helper, or ``None``: the caller reads it (the helper is not
        started or not ready yet, or cannot answer)."""
        self.records += len(records)
        answer = self._ask(records, page_number) if self._usable() else None
        if answer is None:
            self.read_here += 1
            return None
        self.read_apart += 1
        return self.apart.rebuild(answer, page_number, self.resource, len(records))

    def _usable(self) -> bool:
        if self._gone:
            return False
        if self._process is None:
            if self.records > START_AFTER_RECORDS:
                self._start()
            return False
        if not self._ready:
            self._ready = self._answered_ready()
        return self._ready

    def _start(self) -> None:
        # Embedded interpreters (uWSGI, mod_wsgi) set sys.executable to their own binary, or to
        # nothing: started with "-c", it would not run Python.
        if not os.path.basename(sys.executable or "").lower().startswith(("python", "pypy")):
            self._give_up(f"sys.executable {sys.executable!r} is not a Python interpreter")
            return
        module = self.apart.reader.partition(":")[0]
        package = module.rpartition(".")[0]
        job = {
            "path": list(sys.path),
            "package": (package, next(iter(importlib.import_module(package).__path__))),
            "reader": self.apart.reader,
        }
        try:
            # This interpreter, running fixed code: nothing here comes from outside.
            self._process = subprocess.Popen(  # noqa: S603
                [sys.executable, "-c", BOOTSTRAP],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
            assert self._process.stdin is not None
            self._process.stdin.write(pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
            self._process.stdin.flush()
        except (OSError, ValueError) as exc:
            self._give_up(f"it could not start ({exc})")

    def _answered_ready(self) -> bool:
        """Whether the helper has said it is ready, without waiting for it."""
        assert self._process is not None and self._process.stdout is not None
        stdout = self._process.stdout
        try:
            if not select.select([stdout], [], [], READY_WAIT)[0]:
                return False
            frame = _read_frame(stdout)
        except (OSError, ValueError):
            frame = None
        if frame != ("ready",):
            self._give_up(f"it did not start (exit code {self._process.poll()})")
            return False
        return True

    def _ask(self, records: Sequence[Any], page_number: int) -> Any | None:
        process = self._process
        assert process is not None and process.stdin is not None and process.stdout is not None
        request = (list(map(bytes, records)), page_number, self.resource)
        try:
            _write_frame(process.stdin, request)
            frame = _read_frame(process.stdout)
        except (OSError, ValueError, EOFError, pickle.UnpicklingError):
            frame = None
        if frame is None:
            self._give_up(f"it ended (exit code {process.poll()})")
            return None
        if frame[0] == "error":
            # Read here instead, where the same error is raised or the record set aside as
            # it would be without the helper. The helper goes on with the next page.
            logger.info("%s page %d: the parsing process failed (%s)", *frame[1:])
            return None
        return frame[1]

    def _give_up(self, why: str) -> None:
        with self._lock:
            if self._gone:
                return
            self._gone = True
        logger.warning(
            "The sync's parsing process stopped: %s; reading %s pages on the sync's own thread.",
            why,
            self.resource,
        )
        self.close()

    def close(self) -> None:
        """Stop the helper: its stdin closed (it exits at once), killed if it does not."""
        with self._lock:
            self._gone = True
            process, self._process = self._process, None
        if process is None:
            return
        assert process.stdin is not None and process.stdout is not None
        with contextlib.suppress(OSError):
            process.stdin.close()
        try:
            process.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def _write_frame(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    stream.write(_HEADER.pack(len(data)) + data)
    stream.flush()


def _read_frame(stream: IO[bytes]) -> Any | None:
    """The next frame, or ``None`` at the end of the stream."""
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        return None
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        return None
    return pickle.loads(data)  # noqa: S301 (our own child process, started just above)


def serve(reader: str, stdin: IO[bytes], out: IO[bytes]) -> None:
    """The helper process: answer each page sent on ``stdin`` until it closes."""
    # Ctrl-C reaches the whole process group: the sync decides when the helper stops.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    module, _, name = reader.partition(":")
    read = getattr(importlib.import_module(module), name)
    _write_frame(out, ("ready",))
    try:
        while (request := _read_frame(stdin)) is not None:
            records, page_number, resource = request
            try:
                answer: tuple = ("page", read(records, page_number, resource))
            except Exception as exc:
                answer = ("error", resource, page_number, f"{type(exc).__name__}: {exc}")
            _write_frame(out, answer)
    except BrokenPipeError:
        pass  # the sync is gone
    # Every answer is flushed; nothing is left to do, so no interpreter shutdown either.
    os._exit(0)
