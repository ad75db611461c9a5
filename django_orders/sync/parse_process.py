"""Reading a first sync's pages in a helper process, beside the interpreter that writes them.

Past ``START_AFTER_RECORDS`` records the parsing thread sends each page's bytes to a helper
process (the resource's ``read_apart``) and rebuilds its answer; whatever keeps the helper from
answering leaves the page to the thread. Why, and the rules: docs/architecture/sync.md, "The
parsing process".
"""

from __future__ import annotations

import contextlib
import importlib
import logging
import os
import pickle
import selectors
import struct
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import IO, TYPE_CHECKING, Any

import msgspec

if TYPE_CHECKING:  # the helper imports this module without Django's app registry
    from ..mirror.resources.registry import ReadApart, Resource

logger = logging.getLogger("django_orders.sync")

#: Records a first sync reads on its thread before it starts the helper: a small walk (most
#: tests, a shop with few orders) is over before the helper would have started.
START_AFTER_RECORDS = 2_000
#: Seconds the parsing thread waits for a started helper to say it is ready, each page until it
#: has: none, so a walk never waits for it (it reads pages itself meanwhile).
READY_WAIT = 0.0
#: Seconds the parsing thread waits for the helper's answer to a page (a page takes it tens of
#: milliseconds) before it stops the helper and reads the page itself.
ANSWER_TIMEOUT = 60.0
#: Seconds to wait for a stopped helper to exit before killing it.
STOP_TIMEOUT = 5.0

#: A frame: two bytes that say it is one, its length, a pickle. Anything else on the stream
#: (which the helper's own output cannot reach: see ``BOOTSTRAP``) ends the helper.
_MAGIC = b"do"
_HEADER = struct.Struct("!2sI")
_MAX_FRAME = 256 * 1024 * 1024

#: What the helper's interpreter runs (isolated: ``-I``, so nothing of the working directory or
#: of ``PYTHON*`` variables is imported; the sync's ``sys.path`` then replaces its own). Its
#: answers go out on a copy of its stdout; stdout itself is pointed at stderr (discarded), so a
#: stray ``print`` cannot corrupt them. The reader's package is stood in for by a bare package:
#: its ``__init__`` may need Django's app registry (the resources registry does), which the
#: helper has not set up and does not need.
BOOTSTRAP = """\
import signal
signal.signal(signal.SIGINT, signal.SIG_IGN)
import os, pickle, sys, types
answers = os.fdopen(os.dup(1), "wb", buffering=0)
os.dup2(2, 1)
sys.stdout = sys.stderr
job = pickle.load(sys.stdin.buffer)
sys.path[:] = job["path"]
name, path = job["package"]
package = types.ModuleType(name)
package.__path__ = [path]
sys.modules[name] = package
from django_orders.sync.parse_process import serve
serve(job["reader"], job["expect"], sys.stdin.buffer, answers)
"""

#: The helper's whole environment: none of the sync's (credentials may live there).
_ENVIRONMENT = {"PATH": os.defpath}


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
    records; ``read`` is called by the walk's parsing thread only, ``close`` by the walk.

    The parsing thread owns the pipes while it talks to the helper (``_talking``): ``close``
    closes them only when it is not, and otherwise ends the helper, which ends the talk, and
    the parsing thread closes them itself.
    """

    def __init__(self, apart: ReadApart, resource: str) -> None:
        self.apart = apart
        self.resource = resource
        self.records = 0
        self.read_here = 0
        self.read_apart = 0
        self._process: subprocess.Popen | None = None
        self._ready = False
        self._gone = os.name != "posix"  # pipes are waited on with selectors: POSIX only
        self._lock = threading.Lock()
        self._talking = threading.RLock()

    def read(self, records: Sequence[Any], page_number: int) -> Any | None:
        """The page read by the helper, or ``None``: the caller reads it (the helper is not
        started or not ready yet, or cannot answer, or the page's records are not bytes: the
        transport decoded a body it could not keep as bytes)."""
        self.records += len(records)
        answer = None
        if records and all(type(record) in _BYTES for record in records):
            with self._talking:
                process = self._usable()
                if process is not None:
                    answer = self._ask(process, records, page_number)
                if self._gone and process is not None:
                    _close_pipes(process)  # ``close`` left them to this thread
        if answer is not None:
            try:
                page = self.apart.rebuild(answer, page_number, self.resource, len(records))
            except Exception as exc:  # an answer this process cannot read: read the page here
                self._give_up(f"its answer to page {page_number} could not be read ({exc!r})")
            else:
                self.read_apart += 1
                return page
        self.read_here += 1
        return None

    def _usable(self) -> subprocess.Popen | None:
        process = self._process
        if self._gone:
            return None
        if process is None:
            if self.records > START_AFTER_RECORDS:
                self._start()
            return None
        if not self._ready:
            self._ready = self._answered_ready(process)
        return process if self._ready else None

    def _start(self) -> None:
        # Embedded interpreters (uWSGI, mod_wsgi) set sys.executable to their own binary, or to
        # nothing: started with "-c", it would not run Python.
        if not os.path.basename(sys.executable or "").lower().startswith(("python", "pypy")):
            self._give_up(f"sys.executable {sys.executable!r} is not a Python interpreter")
            return
        try:
            module = self.apart.reader.partition(":")[0]
            package = module.rpartition(".")[0]
            job = {
                # The sync's own path, the working directory ("") as the directory it is.
                "path": [entry or os.getcwd() for entry in sys.path],
                "package": (package, next(iter(importlib.import_module(package).__path__))),
                "reader": self.apart.reader,
                "expect": reader_version(importlib.import_module(module)),
            }
            # This interpreter, running fixed code: nothing here comes from outside.
            process = subprocess.Popen(  # noqa: S603
                [sys.executable, "-I", "-c", BOOTSTRAP],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=_ENVIRONMENT,
                bufsize=0,
            )
        except (OSError, ValueError, ImportError, AttributeError) as exc:
            self._give_up(f"it could not start ({exc})")
            return
        with self._lock:
            ended = self._gone
            if not ended:
                self._process = process
        if ended:  # the walk ended meanwhile
            _stop(process)
            return
        try:
            # A bare pickle: the bootstrap reads it before it can read frames.
            assert process.stdin is not None
            _write_all(process.stdin, pickle.dumps(job, protocol=pickle.HIGHEST_PROTOCOL))
        except (OSError, ValueError) as exc:
            self._give_up(f"it could not start ({exc})")

    def _answered_ready(self, process: subprocess.Popen) -> bool:
        """Whether the helper has said it is ready, without waiting for it."""
        assert process.stdout is not None
        try:
            if not _readable(process.stdout, READY_WAIT):
                return False
            frame = _read_frame(process.stdout, ANSWER_TIMEOUT)
        except Exception:  # whatever it is, the helper is no use
            frame = None
        if frame == ("ready",):
            return True
        if isinstance(frame, tuple) and frame[:1] == ("other code",):
            self._give_up(
                "it runs another version of django-orders than this process "
                f"({frame[1]!r}, not {frame[2]!r}): the package changed since this process "
                "started; restart it"
            )
        else:
            self._give_up(f"it did not start (exit code {_exit_code(process)})")
        return False

    def _ask(self, process: subprocess.Popen, records: Sequence[Any], page_number: int) -> Any:
        try:
            assert process.stdin is not None and process.stdout is not None
            _write_frame(process.stdin, ([bytes(r) for r in records], page_number, self.resource))
            frame = _read_frame(process.stdout, ANSWER_TIMEOUT)
        except TimeoutError:
            self._give_up(
                f"it did not answer page {page_number} within {ANSWER_TIMEOUT:g} s", wait=False
            )
            return None
        except Exception:  # a closed pipe, a stream that is not ours
            frame = None
        if frame is None:
            self._give_up(f"it ended (exit code {_exit_code(process)})")
            return None
        if frame[0] == "error":
            # Read here instead, where the same error is raised or the record set aside as
            # it would be without the helper. The helper goes on with the next page.
            logger.warning("%s page %d: the parsing process failed (%s)", *frame[1:])
            return None
        return frame[1]

    def _give_up(self, why: str, *, wait: bool = True) -> None:
        with self._lock:
            if self._gone:
                return  # the walk is over: nothing to say
            self._gone = True
        logger.warning(
            "The sync's parsing process stopped: %s; reading %s pages on the sync's own thread.",
            why,
            self.resource,
        )
        self.close(wait=wait)

    def close(self, *, wait: bool = True) -> None:
        """Stop the helper: its stdin closed (it exits at once), killed if it has not exited
        within ``STOP_TIMEOUT`` (at once if not ``wait``). While the parsing thread talks to
        it, the helper is killed instead, which ends the talk."""
        with self._lock:
            self._gone = True
            process, self._process = self._process, None
        if process is None:
            return
        if self._talking.acquire(blocking=False):
            try:
                _stop(process, wait=wait)
            finally:
                self._talking.release()
        else:
            _stop(process, wait=False, close=False)


#: What a page's records are sent to the helper as: the transport's bytes of each record.
_BYTES = (msgspec.Raw, bytes)


def reader_version(module: Any) -> tuple:
    """What the sync and its helper must agree on to read pages alike: the package's version
    and the reader module's ``LAYOUT`` (what its answers hold), as each process loaded them."""
    import django_orders

    return django_orders.__version__, getattr(module, "LAYOUT", None)


def _stop(process: subprocess.Popen, *, wait: bool = True, close: bool = True) -> None:
    """End the helper: its stdin closed and ``STOP_TIMEOUT`` to exit if ``wait``, else (or
    then) killed; its pipes closed if ``close``."""
    try:
        if wait:
            assert process.stdin is not None
            with contextlib.suppress(OSError):
                process.stdin.close()
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=STOP_TIMEOUT)
    finally:
        if process.returncode is None:
            process.kill()
            process.wait()
        if close:
            _close_pipes(process)


def _close_pipes(process: subprocess.Popen) -> None:
    for pipe in (process.stdin, process.stdout):
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()


def _exit_code(process: subprocess.Popen) -> int | None:
    """The helper's exit code, once it has exited (its stream ended: it is about to)."""
    with contextlib.suppress(subprocess.TimeoutExpired):
        return process.wait(timeout=1.0)
    return None


def _readable(stream: IO[bytes], timeout: float) -> bool:
    """Whether ``stream`` has bytes (or its end) to read within ``timeout`` seconds; a
    selector, not ``select()``: a busy process may give the pipe a descriptor above 1023."""
    with selectors.DefaultSelector() as selector:
        selector.register(stream, selectors.EVENT_READ)
        return bool(selector.select(timeout))


def _write_frame(stream: IO[bytes], value: Any) -> None:
    data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    _write_all(stream, _HEADER.pack(_MAGIC, len(data)) + data)


def _write_all(stream: IO[bytes], data: bytes) -> None:
    view = memoryview(data)
    while view:  # an unbuffered stream may take part of it
        view = view[stream.write(view) :]
    stream.flush()


def _read_frame(stream: IO[bytes], timeout: float | None = None) -> Any | None:
    """The next frame, or ``None`` at the end of the stream; ``TimeoutError`` if no byte of it
    comes for ``timeout`` seconds (``stream`` unbuffered, then), ``ValueError`` for a stream
    that is not frames."""
    header = _read_exactly(stream, _HEADER.size, timeout)
    if header is None:
        return None
    magic, size = _HEADER.unpack(header)
    if magic != _MAGIC or size > _MAX_FRAME:
        raise ValueError("not a frame")
    data = _read_exactly(stream, size, timeout)
    if data is None:
        return None
    return pickle.loads(data)  # noqa: S301 (our own child process and its parent)


def _read_exactly(stream: IO[bytes], size: int, timeout: float | None) -> bytes | None:
    chunks: list[bytes] = []
    left = size
    while left:
        if timeout is not None and not _readable(stream, timeout):
            raise TimeoutError
        chunk = stream.read(left)
        if not chunk:
            return None
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def serve(reader: str, expect: tuple, stdin: IO[bytes], out: IO[bytes]) -> None:
    """The helper process: answer each page sent on ``stdin`` until it closes, if it reads
    pages as the sync does (``expect``: ``reader_version``)."""
    module_name, _, name = reader.partition(":")
    module = importlib.import_module(module_name)
    read = getattr(module, name)
    if (version := reader_version(module)) != expect:
        _write_frame(out, ("other code", version, expect))
        os._exit(0)
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
