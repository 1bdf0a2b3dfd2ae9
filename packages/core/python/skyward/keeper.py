"""The worker's keeper: ends the processes the worker's tasks started once the worker has ended.

A task may start processes of its own (a training script, a data loader, ``torchrun`` and its
workers). They must not outlive the worker: on a user's own host they would keep its GPUs busy, and
on a reused machine they would collide with the next pool. Nothing in the worker can see to that
when it is SIGKILLed (the OOM killer, a healing replacement, a launcher's stop), so at start it
starts a keeper (:func:`start`): a small process of its own session (a stop that kills the worker's
process group leaves it alone) that waits for the worker to end, however it ends, then sweeps.

What the sweep ends, on Linux (read from ``/proc``):

- every process whose environment holds the worker's scope, ``SKYWARD_WORKER_SCOPE=<its value>``
  (or one under it: each process-executor child gets ``<its value>/<n>``, so that what its tasks
  start can be swept when it is killed or dies): the worker sets it in its own environment at
  start, so everything started under it inherits it, whatever session or process group it moved
  to, and however its parents ended;
- every process of the worker's process group, when the worker leads one (the launchers start it
  in a session of its own), for those started with an environment of their own.

Each gets SIGTERM, then SIGKILL once :data:`TERM_GRACE` seconds have passed (a training script may
save a checkpoint on SIGTERM). A process started with an environment without the variable and in
a session of its own is left alone: that is how a task starts one meant to outlive the worker.
Elsewhere than Linux only the worker's process group is swept.

This module imports only the standard library: the keeper runs it as a script, isolated (``-I
-S``), so no user package or ``site`` is imported into it.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import TYPE_CHECKING, Iterator, MutableMapping, Optional, Set

if TYPE_CHECKING:
    import subprocess

#: the environment variable that marks the processes under a worker
SCOPE_VARIABLE = "SKYWARD_WORKER_SCOPE"
#: seconds between the SIGTERM and the SIGKILL of what a gone worker left
TERM_GRACE = 5.0
#: seconds between two sweeps while something is left (and two looks at the worker without pidfd)
SWEEP_INTERVAL = 0.1
#: seconds after the SIGKILL when the keeper gives up on processes that do not end
GIVE_UP_AFTER = 30.0


def start(environ: MutableMapping[str, str] = os.environ) -> Optional["subprocess.Popen[bytes]"]:
    """Give this process (the worker) a scope and start its keeper; the keeper's ``Popen``, or
    ``None`` when it could not start (the worker runs on: its tasks' processes are then only
    stopped as before). Call it before any thread starts: it changes the environment."""
    # Imported here, not by the keeper process, which needs neither (its start and memory stay small).
    import secrets
    import subprocess

    scope = f"{os.getpid()}-{secrets.token_hex(8)}"
    # The keeper itself runs without the scope (it never sweeps itself anyway).
    keeper_environ = {key: value for key, value in environ.items() if key != SCOPE_VARIABLE}
    environ[SCOPE_VARIABLE] = scope
    try:
        return subprocess.Popen(
            [sys.executable, "-I", "-S", os.path.abspath(__file__), str(os.getpid()), scope],
            env=keeper_environ,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,  # holds no pipe of the worker's open after it ends
            stderr=subprocess.DEVNULL,
            start_new_session=True,  # out of the worker's process group, which a launcher kills
            cwd="/",
        )
    except OSError as error:
        sys.stderr.write(f"skyward worker: could not start its keeper ({error}); processes its tasks start "
                         "may outlive it\n")
        return None


def without_scope(environ: MutableMapping[str, str] = os.environ) -> dict:
    """``environ`` less the worker's scope: for a process meant to outlive the worker (its
    self-destruct command)."""
    return {key: value for key, value in environ.items() if key != SCOPE_VARIABLE}


# -- the keeper process ---------------------------------------------------------------------------


def wait_for_end(worker: int) -> None:
    """Return once process ``worker`` (this process's parent) has ended."""
    if os.getppid() != worker:
        return  # it ended before the keeper started watching
    pidfd_open = getattr(os, "pidfd_open", None)
    if pidfd_open is not None:
        try:
            descriptor = pidfd_open(worker)
        except OSError:
            descriptor = None
        if descriptor is not None:
            try:
                if os.getppid() == worker:  # (not a reused pid: the parent is still the worker)
                    select.select([descriptor], [], [])
            finally:
                os.close(descriptor)
            return
    while os.getppid() == worker:
        time.sleep(SWEEP_INTERVAL * 5)


def _under(entry: bytes, environ: bytes) -> bool:
    """Whether an environment (``/proc/PID/environ``) holds the scope ``entry`` or one under it (a
    process-executor child's: the worker's scope, ``/`` and a number)."""
    nested = entry + b"/"
    return any(variable == entry or variable.startswith(nested) for variable in environ.split(b"\0"))


def _scoped(entry: bytes, group: Optional[int], me: int) -> Iterator[int]:
    """The pids in ``/proc`` of processes under the scope (``entry`` in their environment, or a
    scope under it) or in process group ``group``. Zombies' environments read empty: an ended
    process is never found."""
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == me:
            continue
        pid = int(name)
        if group is not None:
            try:
                with open(f"/proc/{name}/stat", "rb") as stat:
                    fields = stat.read().rsplit(b")", 1)[1].split()
                if int(fields[2]) == group and fields[0] not in (b"Z", b"X"):
                    yield pid
                    continue
            except (OSError, IndexError, ValueError):
                continue
        try:
            with open(f"/proc/{name}/environ", "rb") as environ:
                if _under(entry, environ.read()):
                    yield pid
        except OSError:  # gone, or another user's
            continue


def _signal(pid: int, number: int) -> None:
    try:
        os.kill(pid, number)
    except (ProcessLookupError, PermissionError):
        pass


def sweep(scope: str, group: Optional[int], grace: float = TERM_GRACE) -> Set[int]:
    """SIGTERM every process under ``scope`` or in ``group``, SIGKILL those left after ``grace``
    seconds; returns once none is left (or :data:`GIVE_UP_AFTER` seconds after the SIGKILL). The
    pids signalled. The keeper sweeps the worker's scope; the process executor a child's, when the
    child is killed (its task cancelled or timed out) or dies."""
    entry = f"{SCOPE_VARIABLE}={scope}".encode()
    me = os.getpid()
    started = time.monotonic()
    signalled: Set[int] = set()
    termed: Set[int] = set()
    while True:
        late = time.monotonic() - started >= grace
        if sys.platform.startswith("linux"):
            found = list(_scoped(entry, group, me))
        else:
            found = [-group] if group is not None and _group_alive(group) else []
        if not found:
            return signalled
        if late and time.monotonic() - started > grace + GIVE_UP_AFTER:
            return signalled
        for pid in found:
            if late:
                _signal(pid, signal.SIGKILL)
            elif pid not in termed:
                _signal(pid, signal.SIGTERM)
                termed.add(pid)
            signalled.add(pid)
        time.sleep(SWEEP_INTERVAL)


def _group_alive(group: int) -> bool:
    try:
        os.killpg(group, 0)
        return True
    except (ProcessLookupError, PermissionError):
        return False


def main(argv: list) -> None:
    worker, scope = int(argv[1]), argv[2]
    try:
        group: Optional[int] = worker if os.getpgid(worker) == worker else None
    except OSError:
        group = None  # gone already: what it led cannot be told from a group it did not
    wait_for_end(worker)
    sweep(scope, group)


if __name__ == "__main__":
    main(sys.argv)
