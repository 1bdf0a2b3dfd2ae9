"""A task stopped in the thread executor after a slot thread took it and before its turn opened
(the thread is preparing it: its context, its input streams) never runs: no interrupt can reach it
then, and the slot has a fresh thread already. Before, it ran to its end on the old thread — a
nested joblib batch cancelled as it started slept its minute out (plugin-joblib's e2e "a failed
batch stops the batches already sent")."""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Tuple

import worker_client  # noqa: F401  (puts the runtime on sys.path)
from skyward.context import TaskContext
from skyward.executors import ThreadExecutor
from skyward.task import Task

WAIT = 30


class Runner:
    """Records the tasks it runs."""

    on_declared_timeout: Any = None

    def __init__(self) -> None:
        self.ran: List[str] = []

    def run(self, fn: str, args: Any, kwargs: Any, stream: bool, emit: Any, context: Any, keep: bool) -> Any:
        self.ran.append(fn)
        return ("value", fn)


class Router:
    """Makes each task's context; the first one waits, mid-preparation, until ``go`` is set."""

    def __init__(self) -> None:
        self.preparing = threading.Event()
        self.go = threading.Event()

    def new_context(self, key: Any, slot: int) -> TaskContext:
        if not self.preparing.is_set():
            self.preparing.set()
            assert self.go.wait(WAIT)
        return TaskContext(key, slot, (_Channel(), _Channel()))


class _Channel:
    def flush(self) -> None:
        pass


class Host:
    """Calls what the executor posts on the posting thread, and keeps the outcomes."""

    def __init__(self) -> None:
        self.done: List[Tuple[str, Any]] = []
        self.finished = threading.Condition()

    def post(self, callback: Callable[..., None], *args: Any) -> None:
        callback(*args)

    def on_done(self, task: Task, outcome: Any) -> None:
        with self.finished:
            self.done.append((task.id, outcome))
            self.finished.notify_all()

    def wait_done(self, count: int) -> List[Tuple[str, Any]]:
        with self.finished:
            assert self.finished.wait_for(lambda: len(self.done) >= count, WAIT), self.done
            return list(self.done)


def task(task_id: str) -> Task:
    return Task(task_id, task_id, [], {}, None, False, None, None)


def test_a_task_stopped_before_its_turn_opens_never_runs_and_its_slot_serves_on() -> None:
    runner, router, host = Runner(), Router(), Host()
    executor = ThreadExecutor(1, runner, host, router, lambda line: None)  # type: ignore[arg-type]
    try:
        stopped = task("stopped")
        executor.enqueue(stopped)
        assert router.preparing.wait(WAIT)
        assert stopped.state == "running" and stopped.thread_id is None  # taken, its turn not open
        executor.stop_task(stopped)  # as the table does for a cancel: the slot gets a fresh thread
        executor.enqueue(task("next"))
        assert host.wait_done(1)[0][0] == "next"  # served by the fresh thread meanwhile
        router.go.set()
        done = dict(host.wait_done(2))
        assert done["stopped"][:3] == ("error", "cancelled", "TaskInterrupted")  # discarded by the table: the task is finished
        assert runner.ran == ["next"]  # the stopped one never ran
    finally:
        router.go.set()
        executor.begin_close()


def test_a_task_whose_turn_opened_is_not_marked_before_it_runs() -> None:
    # The ordinary path is unchanged: taken, prepared, run, answered.
    runner, router, host = Runner(), Router(), Host()
    router.preparing.set()
    executor = ThreadExecutor(2, runner, host, router, lambda line: None)  # type: ignore[arg-type]
    try:
        for name in ("a", "b", "c"):
            executor.enqueue(task(name))
        assert sorted(task_id for task_id, _ in host.wait_done(3)) == ["a", "b", "c"]
        assert sorted(runner.ran) == ["a", "b", "c"]
    finally:
        executor.begin_close()
