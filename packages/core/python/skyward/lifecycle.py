"""How long a worker lives: its TTL without a client, a detached pool's budget, and the
self-destruct that ends the machine when either runs out (docs/sessions.md).

The self-destruct is skipped while another live worker owns the root directory this one was
started in (:func:`judge_root_owner`, a pure function of what was read; :func:`read_root_owner`
does the reading).
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from typing import Callable, Collection, NamedTuple

from .keeper import without_scope

#: what a worker without a client does when its clock runs out: ``stop(reason, self_destruct)``
StopRequest = Callable[[str, bool], None]

#: seconds between looks, past the TTL, at whether a detached pool's tasks are done
BUSY_RECHECK = 1.0


class Lifetime:
    """The TTL clock and the detached budget's timer; either ends in a self-destructing stop."""

    def __init__(self, loop: asyncio.AbstractEventLoop, ttl: float | None, log: Callable[[str], None],
                 request_stop: StopRequest) -> None:
        self._loop = loop
        self.ttl = ttl
        self._log = log
        self._request_stop = request_stop
        self._ttl_handle: asyncio.TimerHandle | None = None
        #: the budget's end while detached (`release` with `deadline`): the worker stops itself then
        self._budget_handle: asyncio.TimerHandle | None = None
        #: set once the worker begins to stop: no clock starts after it
        self.stopping = False
        #: whether the TTL must wait, at its end, for work a client will come back for (a detached
        #: pool's tasks still running): then the grace period starts again once that is done
        self.busy: Callable[[], bool] = lambda: False

    def begin_stop(self) -> bool:
        """Marks the worker stopping and stops both clocks; False when it was stopping already."""
        if self.stopping:
            return False
        self.stopping = True
        self.cancel_ttl()
        self.cancel_budget()
        return True

    def start_ttl(self, initial: bool = False) -> None:
        """Starts the TTL clock: the worker stops (self-destructing) unless a client comes within it.

        A TTL of 0 means no grace period: stop as soon as the client lets go. Before the first client
        has connected the clock gives it at least two minutes, since it is on its way.
        """
        self.cancel_ttl()
        if self.ttl is None or self.stopping:
            return
        delay = max(self.ttl, 120.0) if initial else max(self.ttl, 0.0)
        self._ttl_handle = self._loop.call_later(delay, self._ttl_expired)

    def cancel_ttl(self) -> None:
        if self._ttl_handle is not None:
            self._ttl_handle.cancel()
            self._ttl_handle = None

    def start_budget(self, seconds: float) -> None:
        """A detached pool's budget runs out in ``seconds``: the worker stops then unless a pool attaches."""
        self.cancel_budget()
        self._log(f"the pool's budget runs out in {seconds:.1f} s: stopping then unless a pool attaches")
        self._budget_handle = self._loop.call_later(max(seconds, 0.0), self._budget_expired)

    def cancel_budget(self) -> None:
        if self._budget_handle is not None:
            self._budget_handle.cancel()
            self._budget_handle = None

    def _budget_expired(self) -> None:
        self._budget_handle = None
        self._request_stop("the pool's budget ran out while detached", True)

    def _ttl_expired(self) -> None:
        self._ttl_handle = None
        if self.busy():
            # The TTL is an idle grace period: results still coming are what the client comes back
            # for. Looked at again every few seconds (a task's own timeout bounds the wait; the
            # budget's deadline, when the pool has one, stops the worker regardless).
            self._log(f"no client for {self.ttl} s (ttl), but the detached pool's tasks still run: "
                      "the ttl starts again once they are done")
            self._ttl_handle = self._loop.call_later(BUSY_RECHECK, self._busy_recheck)
            return
        self._request_stop(f"no client for {self.ttl} s (ttl)", True)

    def _busy_recheck(self) -> None:
        self._ttl_handle = None
        if self.busy():
            self._ttl_handle = self._loop.call_later(BUSY_RECHECK, self._busy_recheck)
        else:
            self.start_ttl()


class RootVerdict(NamedTuple):
    """What the root's owner record says about the self-destruct."""

    #: why the self-destruct must not run (another live worker took the root), or None
    successor: str | None
    #: the record is missing: a launcher is taking the root over
    missing: bool
    #: a line for the log, when the record could not be used
    note: str | None = None


def judge_root_owner(path: str, record: str | None, read_error: OSError | None, own_pids: Collection[int],
                     owner_command: bytes | None) -> RootVerdict:
    """Whether the self-destruct must not run, from what was read (nothing is read here).

    A launcher that shares a root between the workers it starts there (one after another: a
    replacement of a node declared lost, a later pool) names the root's current owner in the
    file ``SKYWARD_ROOT_OWNER`` points to (``path``), rewriting it for each new worker. The
    self-destruct (removing the pool's files, ending the machine) is skipped only while that file
    names another live Skyward worker; anything else (this worker, a dead pid, a pid reused by an
    unrelated process, an unreadable record) lets it run, so that nothing is left billing.

    ``record`` is the file's text (None when it could not be read: missing, or ``read_error``);
    ``own_pids`` the worker's pid and its parent's (the shell that runs it and unmounts the
    volumes after it); ``owner_command`` the command line of the pid the record names (None when
    no such process runs, or none was looked up).
    """
    if record is None:
        if read_error is None:
            return RootVerdict(None, True)
        return RootVerdict(None, False, f"{path} could not be read ({read_error!r}): the self-destruct runs")
    owner = root_owner_pid(record)
    if owner is None:
        return RootVerdict(None, False, f"{path} does not name a pid ({record.strip()[:40]!r}): the self-destruct runs")
    if owner in own_pids or owner <= 0:
        return RootVerdict(None, False)
    if owner_command is None:
        return RootVerdict(None, False)  # the owner is gone: nothing alive uses the root
    if b"skyward" not in owner_command:
        return RootVerdict(None, False)  # the pid now belongs to another program: the owner is gone
    return RootVerdict(f"the root now belongs to the live worker pid {owner} ({path})", False)


def root_owner_pid(record: str) -> int | None:
    """The pid an owner record names, or None when it names none."""
    try:
        return int(record.strip())
    except ValueError:
        return None


def read_root_owner(path: str) -> RootVerdict:
    """Reads the owner record at ``path`` and the command line of the pid it names, then judges."""
    own_pids = (os.getpid(), os.getppid())
    try:
        with open(path, encoding="utf-8") as handle:
            record: str | None = handle.read()
        read_error: OSError | None = None
    except FileNotFoundError:
        record, read_error = None, None
    except OSError as error:
        record, read_error = None, error
    owner = root_owner_pid(record) if record is not None else None
    command = None
    if owner is not None and owner > 0 and owner not in own_pids:
        try:
            with open(f"/proc/{owner}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ")
        except OSError:
            command = None
    return judge_root_owner(path, record, read_error, own_pids, command)


async def root_successor_settled(path: str | None, log: Callable[[str], None]) -> str | None:
    """Why the self-destruct must not run, waiting out a launcher that is taking the root over.

    A missing owner record means a launch is under way (the launcher removes it before it
    uploads and writes the new worker's pid once it starts): it is read again for up to
    ``SKYWARD_ROOT_TAKEOVER_WAIT`` seconds (30). If it is still missing then, the launch did not
    finish and nothing else will end this machine: the self-destruct runs — a machine billing
    forever is the worse mistake.
    """
    if path is None:
        return None
    try:
        wait = float(os.environ.get("SKYWARD_ROOT_TAKEOVER_WAIT", "30"))
    except ValueError:
        wait = 30.0
    deadline = time.monotonic() + max(wait, 0.0)
    while True:
        verdict = read_root_owner(path)
        if verdict.note is not None:
            log(verdict.note)
        if not verdict.missing:
            return verdict.successor
        if time.monotonic() >= deadline:
            log(f"{path} is still missing after {wait:g} s: the self-destruct runs")
            return None
        await asyncio.sleep(min(1.0, max(wait / 10, 0.05)))


async def run_self_destruct(loop: asyncio.AbstractEventLoop, command: str, root_owner: str | None,
                        log: Callable[[str], None]) -> None:
    """Runs the ``--self-destruct`` command, unless another live worker owns the root now."""
    successor = await root_successor_settled(root_owner, log)
    if successor is not None:
        log(f"self-destruct skipped: {successor}")
        return
    log("running the self-destruct command")
    try:
        await loop.run_in_executor(None, _run_command, command)
    except Exception as error:
        log(f"self-destruct failed: {error!r}")


def _run_command(command: str) -> None:
    # Out of the worker's scope and process group: what it leaves running (a delayed shutdown)
    # outlives the worker (keeper.py ends everything else the worker started).
    subprocess.run(["/bin/sh", "-c", command], stdin=subprocess.DEVNULL, timeout=600, check=False,
                   env=without_scope(), start_new_session=True)
