"""Executors: where the worker's tasks run.

``thread`` runs tasks on ``concurrency`` long-lived threads (one per slot); a cancelled or
timed-out task gets an asynchronous exception in its thread (:meth:`ThreadExecutor.stop_task`).
``process`` runs each slot's tasks in a child interpreter (``python -m skyward.child``) that it
reuses, or replaces after every task when processes are not reused. Both report back to the
worker (the *host*) on the event loop thread through the :class:`~skyward.task.Host` methods;
the worker drives either through the :class:`~skyward.task.Executor` protocol.

A worker has one executor for its tasks and, once a nested task arrives, a second one of the same
kind for nested tasks (nested dispatch), whose slots are numbered after the first one's
(``first_slot``): so parents waiting on nested tasks never take the slots those need.
"""

from __future__ import annotations

import asyncio
import collections
import os
import pickle
import signal
import socket
import struct
import subprocess
import sys
import threading
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

from . import deferred_interrupts
from .context import SubtaskOutcome, TaskContext, current_task, runtime
from .dispatch import end_subtasks
from .execution import InputStream, Outcome, TaskRunner, error_outcome, exception_outcome
from .output import OutputRouter
from .protocol import StreamRef
from .task import Host, Task

RUNTIME_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHILD_EXIT_GRACE = 5.0  # seconds an idle child gets to exit its around_process hooks at close
#: seconds after an interrupt when a thread still inside its task is reported as stuck in a C call
INTERRUPT_REPORT_DELAY = 1.0


def _with_streams(
    args: List[Any], kwargs: Dict[str, Any], make: Callable[[int], Any]
) -> Tuple[List[Any], Dict[str, Any]]:
    """Replace whole-argument ``StreamRef`` markers with ``make(index)``."""
    return (
        [make(arg.index) if type(arg) is StreamRef else arg for arg in args],
        {key: make(value.index) if type(value) is StreamRef else value for key, value in kwargs.items()},
    )


def _next_queued(tasks: Deque[Task]) -> Optional[Task]:
    while tasks:
        task = tasks.popleft()
        if task.state == "queued":
            return task
    return None


# ---------------------------------------------------------------------------------------------
# thread
# ---------------------------------------------------------------------------------------------


class TaskInterrupted(deferred_interrupts.Interrupt):
    """Raised in a slot thread whose task was cancelled or timed out (a ``BaseException``, so the
    task's ``except Exception`` blocks let it through; its ``finally`` blocks run). Raised at most
    once: a task that catches it and carries on runs on."""


class ThreadExecutor:
    """``concurrency`` long-lived threads taking tasks from one shared queue (plus one per slot
    for pinned tasks). Threads take their next task themselves, so a busy worker needs no event
    loop round trip between tasks; results reach the loop in batches through ``host.post``.
    """

    name = "thread"

    def __init__(self, concurrency: int, runner: TaskRunner, host: Host, router: OutputRouter,
                 log: Callable[[str], None], first_slot: int = 0, label: str = "slot") -> None:
        self.concurrency = concurrency
        self.first_slot = first_slot
        self._label = label
        self._runner = runner
        runner.on_declared_timeout = self._declared_timeout
        self._host = host
        self._router = router
        self._log = log
        self._condition = threading.Condition()
        #: guards every task's ``thread_id``/``interrupted``: an interrupt is sent only while the
        #: task's own turn in its thread is open (a plain Lock: its ``with`` leaves no bytecode
        #: between acquiring and the block, where an asynchronous exception could strand it)
        self._turns = threading.Lock()
        self._shared: Deque[Task] = collections.deque()
        self._pinned: List[Deque[Task]] = [collections.deque() for _ in range(concurrency)]
        self._threads: List[Optional[threading.Thread]] = [None] * concurrency
        self._closing = False
        for slot in range(concurrency):
            self._start_thread(slot)

    def _start_thread(self, slot: int) -> None:
        thread = threading.Thread(target=self._serve, args=(slot,), name=f"skyward-{self._label}-{slot}", daemon=True)
        self._threads[slot] = thread
        thread.start()

    def apply_cluster(self, cluster: Dict[str, Any], env: Dict[str, str]) -> None:
        pass  # threads share the worker's process state

    def enqueue(self, task: Task) -> None:
        with self._condition:
            if task.pin is None:
                self._shared.append(task)
                self._condition.notify()
            else:
                self._pinned[task.pin].append(task)
                self._condition.notify_all()

    def cancel_queued(self, task: Task) -> bool:
        """Drop a task no thread has taken yet; False if one has."""
        with self._condition:
            if task.state == "queued":
                task.state = "done"
                return True
            return False

    def _take(self, slot: int) -> Optional[Task]:
        me = threading.current_thread()
        with self._condition:
            while True:
                if self._threads[slot] is not me or self._closing:
                    return None
                task = _next_queued(self._pinned[slot]) or _next_queued(self._shared)
                if task is not None:
                    task.state = "running"
                    task.slot = self.first_slot + slot
                    return task
                self._condition.wait()

    def _prepare(self, task: Task) -> Tuple[List[Any], Dict[str, Any]]:
        task.context = self._router.new_context(task, task.slot)
        if not task.stream_indices:
            return task.args, task.kwargs
        post = self._host.post
        on_pull = self._host.on_pull

        def make(index: int) -> InputStream:
            stream = InputStream(index, lambda n: post(on_pull, task, index, n))
            task.inputs[index] = stream
            return stream

        return _with_streams(task.args, task.kwargs, make)

    def _serve(self, slot: int) -> None:
        runner = self._runner
        host = self._host
        post = host.post
        running = runtime.running
        while True:
            task = self._take(slot)
            if task is None:
                return
            args, kwargs = self._prepare(task)
            context = task.context
            assert context is not None
            if task.timeout is not None:
                post(host.on_started, task)

            def emit(seq: int, value: Any, task: Task = task, context: TaskContext = context) -> None:
                post(host.on_item, task, seq, value)
                connection = task.connection  # (a LocalParent for a subtask run here: no bytes)
                if getattr(connection, "unsent_bytes", 0) > connection.high_water:
                    # Its client takes the items slower than the task makes them: the task waits.
                    connection.wait_drained(lambda: context.abandoned)

            token = current_task.set(context)
            running.add(context)
            try:
                try:
                    self._open_turn(task)
                    try:
                        outcome = runner.run(task.fn, args, kwargs, task.stream, emit, context, task.keep)
                    finally:
                        self._close_turn(task)
                except TaskInterrupted:
                    # Landed outside the task's own code (the runner reports the rest as an error);
                    # the task is finished already, so this outcome is discarded.
                    self._close_turn(task)
                    outcome = error_outcome("cancelled", "TaskInterrupted", "the task was stopped")
                except BaseException as error:  # the runtime's own failure: the task is answered, the slot lives on
                    outcome = exception_outcome(error)
            finally:
                running.discard(context)
                current_task.reset(token)
                end_subtasks(context)
            context.close()
            post(host.on_done, task, outcome)

    def _declared_timeout(self, context: TaskContext, seconds: float) -> None:
        # @sky.function(timeout=…): the task's clock, when the client gave it none.
        self._host.post(_apply_declared_timeout, self._host, context.key, seconds)

    def _open_turn(self, task: Task) -> None:
        with self._turns:
            if task.interrupted:
                # Stopped after its thread took it and before its turn opened: it never runs (no
                # interrupt could reach it then, and the slot has a fresh thread already).
                raise TaskInterrupted()
            task.thread_id = threading.get_ident()

    def _close_turn(self, task: Task) -> None:
        """End the time an interrupt may be sent for ``task``; withdraw one sent but not raised yet,
        so it never lands in what the thread runs next."""
        with self._turns:
            task.thread_id = None
            if task.interrupted:
                deferred_interrupts.forget(threading.get_ident())

    def _interrupt(self, task: Task) -> int | None:
        """Raise :class:`TaskInterrupted` in the thread running ``task``; the thread id, or None
        when the task's turn is not open (not yet, or over) or it was interrupted already."""
        with self._turns:
            thread_id = task.thread_id
            if task.interrupted:
                return None
            # Marked even before its turn opens (its thread took it, and prepares it): the turn never
            # opens then (_open_turn).
            task.interrupted = True
            if thread_id is None:
                return None
            # Held while the thread takes a frame of the collections' copy (deferred_interrupts.py).
            return thread_id if deferred_interrupts.send(thread_id, TaskInterrupted) else None

    def stop_task(self, task: Task) -> None:
        """Interrupt the task's thread and give its slot a fresh thread.

        The interrupt stops Python code at its next bytecode; code inside a C call (``time.sleep``,
        a blocking read, a long numpy operation) runs on until the call returns. Either way the old
        thread exits once its task has returned, and the slot serves the next task at once.
        """
        if task.context is not None:
            task.context.abandoned = True
            end_subtasks(task.context)
        for stream in task.inputs.values():
            stream.fail("the task was stopped")
        thread_id = self._interrupt(task)
        with self._condition:
            self._start_thread(task.slot - self.first_slot)
            self._condition.notify_all()
        if thread_id is not None:
            asyncio.get_running_loop().call_later(INTERRUPT_REPORT_DELAY, self._report_stuck, task, thread_id)

    def _report_stuck(self, task: Task, thread_id: int) -> None:
        if task.thread_id == thread_id:
            self._log(
                f"task {task.id} ({task.fn}) was stopped, but its thread is still running it "
                f"{INTERRUPT_REPORT_DELAY:g} s later: it is inside a call Python cannot interrupt (C code "
                "such as time.sleep, a blocking read or a native library; it stops when that returns) "
                'or it caught the interrupt; use executor "process" for code that must stop at once'
            )

    def deliver_input(self, task: Task, stream_index: int, kind: str, value: Any) -> None:
        stream = task.inputs.get(stream_index)
        if stream is None:
            return
        if kind == "in":
            stream.push(value)
        elif kind == "in_end":
            stream.finish()
        else:
            stream.fail(str(value))

    def deliver_subresult(self, task: Task, sub: int, outcome: SubtaskOutcome) -> None:
        subtasks = task.context.subtasks if task.context is not None else None
        if subtasks is not None:
            subtasks.resolve(sub, outcome)

    def apply_env(self, changes: Dict[str, str | None]) -> None:
        pass  # threads share the worker's environment

    def begin_close(self) -> None:
        """Take no more tasks (threads still running user code are left to finish or not)."""
        with self._condition:
            self._closing = True
            self._condition.notify_all()

    async def close(self) -> None:
        self.begin_close()


# ---------------------------------------------------------------------------------------------
# process
# ---------------------------------------------------------------------------------------------

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
    __slots__ = ("slot", "process", "link", "task", "ready", "retiring", "held_back")

    def __init__(self, slot: int, process: subprocess.Popen[bytes]) -> None:
        self.slot = slot
        self.process = process
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
        child = _Child(slot, process)
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
            task = _next_queued(self._pinned[slot]) or _next_queued(self._shared)
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
                _apply_declared_timeout(self._host, task, message[2])
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


def _apply_declared_timeout(host: Host, task: Task, seconds: float) -> None:
    """A running task's function declares ``@sky.function(timeout=seconds)``: its clock, unless the
    client gave a timeout of its own."""
    if task.state == "running" and (task.timeout is None or task.default_timeout):
        task.timeout = seconds
        task.default_timeout = False
        host.restart_clock(task)
