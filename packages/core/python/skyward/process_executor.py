"""The process executor: where the worker's tasks run under ``executor: "process"``.

It runs each slot's tasks in a child interpreter (``python -m skyward.child``) that it reuses, or
replaces after every task when processes are not reused; a cancelled or timed-out task's child is
killed, with its process group, and replaced. It reports back to the worker (the *host*) on the
event loop thread through the :class:`~skyward.task.Host` methods; the worker drives it through the
:class:`~skyward.task.Executor` protocol (``executors.py`` has the thread kind).
"""

from __future__ import annotations

import asyncio
import collections
import itertools
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from . import keeper
from .context import SubtaskOutcome, runtime
from .execution import Outcome, error_outcome
from .task import Host, Task, apply_declared_timeout, next_queued

RUNTIME_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD_EXIT_GRACE = 5.0  # seconds an idle child gets to exit its around_process hooks at close
#: numbers the children's scopes (of every executor of the worker: the nested tasks' too)
_CHILD_SCOPES = itertools.count()
_LENGTH = struct.Struct(">I")


class _ChildLink(asyncio.Protocol):
    """The parent's end of the socket to one child: length-prefixed pickles both ways."""

    def __init__(self, on_message: Callable[[Any], None], on_lost: Callable[[], None]) -> None:
        self._on_message = on_message
        self._on_lost = on_lost
        self._buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        buffer = self._buffer
        buffer += data
        offset = 0
        while len(buffer) - offset >= 4:
            (length,) = _LENGTH.unpack_from(buffer, offset)
            if len(buffer) - offset - 4 < length:
                break
            message = pickle.loads(bytes(buffer[offset + 4 : offset + 4 + length]))
            offset += 4 + length
            self._on_message(message)
        if offset:
            del buffer[:offset]

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_lost()

    def send(self, message: Any) -> None:
        if self.transport is not None and not self.transport.is_closing():
            payload = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
            self.transport.write(_LENGTH.pack(len(payload)) + payload)


class _Child:
    __slots__ = ("slot", "process", "scope", "link", "task", "ready", "retiring", "held_back")

    def __init__(self, slot: int, process: subprocess.Popen[bytes], scope: str | None) -> None:
        self.slot = slot
        self.process = process
        #: the child's own scope (the worker's, suffixed): what its tasks start inherits it
        self.scope = scope
        self.link: _ChildLink | None = None
        self.task: Task | None = None
        self.ready = False
        self.retiring = False
        #: its link is not read while its task's client has too much unsent (stream back-pressure)
        self.held_back = False


class ProcessExecutor:
    """One child interpreter per slot, reused for every task or replaced after each one."""

    name = "process"

    def __init__(self, concurrency: int, reuse: bool, host: Host, log: Callable[[str], None],
                 first_slot: int = 0) -> None:
        self.concurrency = concurrency
        self.first_slot = first_slot
        self.reuse = reuse
        self._host = host
        self._log = log
        self._children: List[Optional[_Child]] = [None] * concurrency
        self._cluster: Dict[str, Any] | None = None
        self._env: Dict[str, str] = {}
        self._closing = False
        self._background: set[asyncio.Future[Any]] = set()
        self._shared: Deque[Task] = collections.deque()
        self._pinned: List[Deque[Task]] = [collections.deque() for _ in range(concurrency)]
        #: children given a task while ``around_app`` is being entered: it is sent once that is over
        self._held: List[_Child] = []

    # -- lifecycle ------------------------------------------------------------------------------

    def apply_cluster(self, cluster: Dict[str, Any], env: Dict[str, str]) -> None:
        self._cluster = cluster
        self._env.update(env)
        for slot, child in enumerate(self._children):
            if child is None:
                self._spawn(slot)
            elif child.link is not None:
                child.link.send(("cluster", cluster, env))

    def apply_env(self, changes: Dict[str, str | None]) -> None:
        """Environment changes made in the worker (by ``around_app``) for the children.

        Children started from now on inherit them; running ones get them before their next task
        (one whose link is not connected yet gets them with its ``init``).
        """
        for key, value in changes.items():
            if value is None:
                self._env.pop(key, None)
            else:
                self._env[key] = value
        for child in self._children:
            if child is not None and child.link is not None:
                child.link.send(("env", changes))

    def _spawn(self, slot: int) -> None:
        if self._closing:
            return
        parent_socket, child_socket = socket.socketpair()
        environment = dict(os.environ)
        existing = environment.get("PYTHONPATH")
        environment["PYTHONPATH"] = RUNTIME_ROOT + (os.pathsep + existing if existing else "")
        worker_scope = environment.get(keeper.SCOPE_VARIABLE)
        scope = f"{worker_scope}/{next(_CHILD_SCOPES)}" if worker_scope else None
        if scope is not None:
            environment[keeper.SCOPE_VARIABLE] = scope
        try:
            process = subprocess.Popen(
                [sys.executable, "-m", "skyward.child", str(child_socket.fileno())],
                pass_fds=(child_socket.fileno(),),
                env=environment,
                cwd=os.getcwd(),
                stdin=subprocess.DEVNULL,
                start_new_session=True,  # so a kill takes whatever the task started with it
            )
        finally:
            child_socket.close()
        child = _Child(slot, process, scope)
        self._children[slot] = child
        loop = asyncio.get_running_loop()
        link = _ChildLink(lambda message: self._on_message(child, message), lambda: self._on_lost(child))
        child.link = link
        self._track(loop.create_task(self._connect(child, parent_socket, link)))

    async def _connect(self, child: _Child, parent_socket: socket.socket, link: _ChildLink) -> None:
        loop = asyncio.get_running_loop()
        await loop.connect_accepted_socket(lambda: link, sock=parent_socket)
        link.send(
            (
                "init",
                {
                    "sys_path": list(sys.path),
                    "slot": self.first_slot + child.slot,
                    "concurrency": runtime.concurrency,
                    "cluster": self._cluster,
                    "env": dict(self._env),
                },
            )
        )

    def _track(self, future: asyncio.Future[Any]) -> None:
        self._background.add(future)
        future.add_done_callback(self._background.discard)

    def _slot_ready(self, slot: int) -> bool:
        child = self._children[slot]
        return child is not None and child.ready and child.task is None and not child.retiring

    def pids(self) -> List[int]:
        return [child.process.pid for child in self._children if child is not None]

    # -- tasks ----------------------------------------------------------------------------------

    def enqueue(self, task: Task) -> None:
        if task.pin is None:
            self._shared.append(task)
        else:
            self._pinned[task.pin].append(task)
        self._pump()

    def cancel_queued(self, task: Task) -> bool:
        if task.state == "queued":
            task.state = "done"
            return True
        return False

    @property
    def running(self) -> bool:
        """Whether a child runs a task (one given to a child held for ``around_app`` does not yet)."""
        return any(child is not None and child.task is not None and child not in self._held
                   for child in self._children)

    def _pump(self) -> None:
        """Give queued tasks to the children that are ready and free. Until ``around_app`` is in, a
        task given to a child is held (its clock running, as a thread task's does while it enters the
        hooks) and sent once they are in."""
        if not self._shared and not any(self._pinned) and not self._held:
            return
        # (the nested-task executor's slots come after the tasks' own: a subtask's parent may be inside the hooks)
        gate = self._host.app_gate(self._pump, self.first_slot > 0)
        if gate is not True and gate is not False:
            self._fail_queued(gate)
            return
        if gate is True:
            held, self._held = self._held, []
            for child in held:
                if child.task is not None and child.link is not None and self._children[child.slot] is child:
                    self._send(child, child.task)
        for slot in range(self.concurrency):
            if not self._shared and not self._pinned[slot]:
                continue
            if not self._slot_ready(slot):
                continue
            task = next_queued(self._pinned[slot]) or next_queued(self._shared)
            if task is None:
                continue
            child = self._children[slot]
            assert child is not None and child.link is not None
            task.state = "running"
            task.slot = self.first_slot + slot
            child.task = task
            if gate is True:
                self._send(child, task)
            else:
                self._held.append(child)
            if task.timeout is not None:
                self._host.on_started(task)

    @staticmethod
    def _send(child: _Child, task: Task) -> None:
        assert child.link is not None
        child.link.send(("run", task.id, task.fn, task.args, task.kwargs, task.stream, task.keep))

    def _fail_queued(self, outcome: Outcome) -> None:
        """``around_app`` failed: every queued task, and every task held for it, fails with it."""
        held, self._held = self._held, []
        for child in held:
            task, child.task = child.task, None
            if task is not None:
                self._host.on_done(task, outcome)
        queues = [self._shared, *self._pinned]
        for tasks in queues:
            while tasks:
                task = tasks.popleft()
                if task.state == "queued":
                    task.state = "running"
                    self._host.on_done(task, outcome)

    def _child_of(self, task: Task) -> _Child | None:
        local = task.slot - self.first_slot
        child = self._children[local] if 0 <= local < self.concurrency else None
        return child if child is not None and child.task is task else None

    def stop_task(self, task: Task) -> None:
        """Kill the child running ``task``; a fresh child takes its slot. A task held for ``around_app``
        never reached its child: the child is kept, free for the next task."""
        child = self._child_of(task)
        if child is None:
            return
        child.task = None
        if child in self._held:
            self._held.remove(child)
            self._pump()
        else:
            self._retire(child, kill=True)

    def deliver_input(self, task: Task, stream_index: int, kind: str, value: Any) -> None:
        child = self._child_of(task)
        if child is not None and child.link is not None:
            child.link.send((kind, task.id, stream_index, value))

    def deliver_subresult(self, task: Task, sub: int, outcome: SubtaskOutcome) -> None:
        child = self._child_of(task)
        if child is not None and child.link is not None:
            child.link.send(("subresult", task.id, sub, outcome))

    # -- messages from children -----------------------------------------------------------------

    def _on_message(self, child: _Child, message: Tuple[Any, ...]) -> None:
        kind = message[0]
        task = child.task
        if kind == "out":
            _, task_id, stream, data = message
            owner = task if task is not None and task_id is not None and task.id == task_id else None
            self._host.on_output(owner, self.first_slot + child.slot, stream, data)
        elif kind == "item":
            if task is not None and task.id == message[1]:
                self._host.on_item(task, message[2], message[3])
                connection = task.connection
                if getattr(connection, "unsent_bytes", 0) > connection.high_water and not child.held_back:
                    self._hold_back(child, connection)
        elif kind == "pull":
            if task is not None and task.id == message[1]:
                self._host.on_pull(task, message[2], message[3])
        elif kind == "subtask":
            if task is not None and task.id == message[1]:
                self._host.on_subtask(task, *message[2:])
        elif kind == "subcancel":
            if task is not None and task.id == message[1]:
                self._host.on_subcancel(task, message[2])
        elif kind == "metric":
            if task is not None and task.id == message[1]:
                self._host.on_metric(task, message[2], message[3], message[4])
        elif kind == "timeout":
            if task is not None and task.id == message[1]:
                apply_declared_timeout(self._host, task, message[2])
        elif kind == "done":
            if task is not None and task.id == message[1]:
                child.task = None
                if not self.reuse:
                    self._retire(child, kill=False)
                self._host.on_done(task, message[2])
                self._pump()
        elif kind == "ready":
            child.ready = True
            if self._children[child.slot] is child:
                self._pump()

    @staticmethod
    def _hold_back(child: _Child, connection: Any) -> None:
        """The task's client takes its items slower than the child makes them: the child's link is
        not read until they have gone (the child then waits in its send, its task in its yield)."""
        transport = child.link.transport if child.link is not None else None
        if transport is None or transport.is_closing():
            return
        child.held_back = True
        transport.pause_reading()

        def resume() -> None:
            child.held_back = False
            if not transport.is_closing():
                transport.resume_reading()

        connection.when_drained(resume)

    def _retire(self, child: _Child, kill: bool) -> None:
        """Take a child out of service and start its replacement."""
        child.retiring = True
        if kill:
            self._kill(child)
            self._sweep(child)
        elif child.link is not None:
            child.link.send(("exit",))
        if self._children[child.slot] is child and not self._closing:
            self._spawn(child.slot)
        self._track(asyncio.ensure_future(self._reap(child)))

    @staticmethod
    def _kill(child: _Child) -> None:
        try:
            os.killpg(child.process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            try:
                child.process.kill()
            except ProcessLookupError:
                pass

    def _sweep(self, child: _Child) -> None:
        """End what the tasks of a child that was killed or died had started, in whatever session
        (its process group alone misses those in sessions of their own: ``torchrun``'s workers)."""
        if child.scope is not None:
            self._track(asyncio.get_running_loop().run_in_executor(None, keeper.sweep, child.scope, None))

    async def _reap(self, child: _Child, grace: float = 10.0) -> int | None:
        """Wait for the child to exit, killing it after ``grace`` seconds."""
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(None, child.process.wait), grace)
        except asyncio.TimeoutError:
            self._kill(child)
            return None

    def _on_lost(self, child: _Child) -> None:
        if child.retiring or self._closing:
            return
        child.retiring = True
        task, child.task = child.task, None
        self._sweep(child)
        if self._children[child.slot] is child:
            self._spawn(child.slot)
        self._track(asyncio.ensure_future(self._report_death(child, task)))

    async def _report_death(self, child: _Child, task: Task | None) -> None:
        code = await self._reap(child)
        how = (
            f"was killed by signal {-code}" if code is not None and code < 0 else f"exited with code {code}"
        )
        message = f"the executor process (pid {child.process.pid}) {how}"
        if task is None:
            self._log(f"{message} while idle; replaced it")
            return
        self._host.on_done(
            task, error_outcome("worker_died", "WorkerDiedError", f"{message} while running the task")
        )
        self._pump()

    def begin_close(self) -> None:
        """Start no more children (stopping a task no longer spawns its replacement)."""
        self._closing = True

    async def close(self) -> None:
        """Stop the children: idle ones are asked to exit (running their ``around_process`` exits),
        busy ones are killed."""
        self._closing = True
        leaving = []
        for child in self._children:
            if child is None:
                continue
            child.retiring = True
            if child.task is None and child.ready and child.link is not None:
                child.link.send(("exit",))
                leaving.append(child)
            else:
                self._kill(child)
        await asyncio.gather(*(self._reap(child, CHILD_EXIT_GRACE) for child in leaving))
        for child in self._children:
            if child is not None:
                await self._reap(child)
