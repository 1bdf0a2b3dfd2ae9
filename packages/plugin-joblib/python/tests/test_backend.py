"""The joblib backend's own logic, without a pool.

Nested dispatch is replaced here (and only here) by a process pool: each batch is pickled, sent to
another process, run there by ``run_batch`` and its outcome pickled back, so what crosses the
boundary is exactly what crosses it on a real pool. The real thing is tested end to end in
``test/e2e.test.ts``.
"""

from __future__ import annotations

import contextvars
import multiprocessing
import os
import pickle
import sys
import threading
import time
import types
from concurrent.futures import Future, ProcessPoolExecutor
from typing import Any, Iterator, List

import joblib
import pytest
from joblib import Parallel, delayed
from joblib import parallel as joblib_parallel

import skyward_plugin_joblib as plugin

JOBLIB_VERSION = tuple(int(part) for part in joblib.__version__.split(".")[:2])
CAPACITY = 4

task_marker: contextvars.ContextVar[str] = contextvars.ContextVar("task_marker", default="none")


class FakeDispatch:
    """Stands in for ``skyward.dispatch``: batches run in other processes, through pickle."""

    def __init__(self) -> None:
        fork = multiprocessing.get_context("fork")
        self.executor = ProcessPoolExecutor(max_workers=CAPACITY, mp_context=fork)
        self.lock = threading.Lock()
        self.submitted: List[str] = []

    def submit(self, payload: bytes) -> "Future[Any]":
        assert isinstance(payload, bytes)
        with self.lock:
            self.submitted.append(task_marker.get())
        return self.executor.submit(plugin.run_batch, payload)

    def capacity(self) -> int:
        return CAPACITY


@pytest.fixture
def dispatch(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeDispatch]:
    fake = FakeDispatch()
    monkeypatch.setattr(plugin, "_submit", fake.submit)
    monkeypatch.setattr(plugin, "_capacity", fake.capacity)
    with plugin.skyward_backend():
        yield fake
    fake.executor.shutdown(wait=True, cancel_futures=True)


# -- functions the batches run (importable, so they pickle by reference) -------------------------


def square_and_pid(i: int) -> tuple:
    return i * i, os.getpid()


class Unlucky(ValueError):
    """A custom exception type: it must come back as itself."""


def fail_on(i: int, bad: int) -> int:
    if i == bad:
        raise Unlucky(f"item {i} is unlucky")
    return i


class NeedsTwoArguments(Exception):
    def __init__(self, code: int, detail: str) -> None:
        super().__init__(f"{code}: {detail}")


def fail_unpicklably(i: int) -> int:
    raise NeedsTwoArguments(42, "no way back")


def inner_parallel(i: int) -> tuple:
    backend, _ = joblib_parallel.get_active_backend()
    inner = Parallel(n_jobs=2)(delayed(abs)(-j) for j in range(i + 2))
    return type(backend).__name__, sum(inner), os.getpid()


def slow(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def span(seconds: float) -> tuple:
    """Sleeps; returns when it started and ended (the batches' processes share this clock)."""
    start = time.time()
    time.sleep(seconds)
    return start, time.time()


def most_at_once(spans: List[tuple]) -> int:
    """The largest number of spans running at the same instant."""
    events = sorted([(start, 1) for start, _ in spans] + [(end, -1) for _, end in spans])
    running = highest = 0
    for _, change in events:  # an end sorts before a start at the same instant
        running += change
        highest = max(highest, running)
    return highest


# -- tests ----------------------------------------------------------------------------------------


def test_n_jobs_minus_one_uses_every_slot_of_the_pool(dispatch: FakeDispatch) -> None:
    assert joblib.effective_n_jobs(-1) == CAPACITY
    assert joblib.effective_n_jobs(-2) == CAPACITY - 1
    assert joblib.effective_n_jobs(-100) == 1
    assert joblib.effective_n_jobs(3) == 3
    # More jobs than the pool has slots: every slot, no more (nothing more can run at once).
    assert joblib.effective_n_jobs(CAPACITY + 6) == CAPACITY
    with pytest.raises(ValueError, match="n_jobs == 0"):
        joblib.effective_n_jobs(0)


@pytest.mark.parametrize("pre_dispatch", ["2 * n_jobs", "all"])
@pytest.mark.parametrize("n_jobs", [2, 3])
def test_n_jobs_limits_how_many_batches_run_at_once(
    dispatch: FakeDispatch, n_jobs: int, pre_dispatch: str
) -> None:
    """joblib dispatches batches ahead (``pre_dispatch``); only ``n_jobs`` of them may run at once."""
    spans = Parallel(n_jobs=n_jobs, pre_dispatch=pre_dispatch)(delayed(span)(0.15) for _ in range(12))
    assert len(spans) == 12
    assert len(dispatch.submitted) >= 2
    assert most_at_once(spans) <= n_jobs
    # ... and the limit is reached: it runs n_jobs at once, not one at a time.
    assert most_at_once(spans) == n_jobs


def test_n_jobs_above_the_pool_capacity_uses_every_slot(dispatch: FakeDispatch) -> None:
    parallel = Parallel(n_jobs=CAPACITY * 3)
    spans = parallel(delayed(span)(0.15) for _ in range(16))
    assert most_at_once(spans) == CAPACITY


def test_results_match_a_local_run_and_batches_run_elsewhere(dispatch: FakeDispatch) -> None:
    results = Parallel(n_jobs=-1)(delayed(square_and_pid)(i) for i in range(100))
    assert [value for value, _ in results] == [i * i for i in range(100)]
    pids = {pid for _, pid in results}
    assert os.getpid() not in pids
    assert len(dispatch.submitted) >= 1
    # Auto-batching groups fast items: fewer round trips than items.
    assert len(dispatch.submitted) < 100


def test_the_default_backend_is_skyward_only_inside_the_hook() -> None:
    before = joblib_parallel.DEFAULT_BACKEND
    with plugin.around_app(None, {}):
        assert joblib_parallel.DEFAULT_BACKEND == "skyward"
        assert joblib_parallel.BACKENDS["skyward"] is plugin.SkywardBackend
        with plugin.around_process(None, {}):
            assert joblib_parallel.DEFAULT_BACKEND == "skyward"
        assert joblib_parallel.DEFAULT_BACKEND == "skyward"
    assert joblib_parallel.DEFAULT_BACKEND == before


def test_the_backend_can_be_named_explicitly(dispatch: FakeDispatch) -> None:
    with joblib.parallel_backend("loky"):
        results = Parallel(n_jobs=2, backend="skyward")(delayed(square_and_pid)(i) for i in range(10))
    assert [value for value, _ in results] == [i * i for i in range(10)]
    assert len(dispatch.submitted) >= 1


def test_one_job_runs_in_the_task_itself(dispatch: FakeDispatch) -> None:
    results = Parallel(n_jobs=1)(delayed(square_and_pid)(i) for i in range(5))
    assert results == [(i * i, os.getpid()) for i in range(5)]
    assert dispatch.submitted == []
    # No n_jobs: joblib's default of one job.
    assert Parallel()(delayed(abs)(-i) for i in range(3)) == [0, 1, 2]
    assert dispatch.submitted == []


def test_threads_and_shared_memory_hints_stay_local(dispatch: FakeDispatch) -> None:
    results = Parallel(n_jobs=-1, prefer="threads")(delayed(square_and_pid)(i) for i in range(8))
    assert {pid for _, pid in results} == {os.getpid()}
    results = Parallel(n_jobs=-1, require="sharedmem")(delayed(square_and_pid)(i) for i in range(8))
    assert {pid for _, pid in results} == {os.getpid()}
    assert dispatch.submitted == []


def test_an_exception_in_a_batch_is_re_raised_as_itself(dispatch: FakeDispatch) -> None:
    with pytest.raises(Unlucky, match="item 37 is unlucky") as raised:
        Parallel(n_jobs=-1)(delayed(fail_on)(i, 37) for i in range(100))
    cause = raised.value.__cause__
    assert isinstance(cause, plugin.RemoteTraceback)
    assert "fail_on" in cause.text and "Unlucky: item 37 is unlucky" in cause.text


def test_an_exception_that_cannot_travel_arrives_as_a_remote_batch_error(dispatch: FakeDispatch) -> None:
    with pytest.raises(plugin.RemoteBatchError) as raised:
        Parallel(n_jobs=2)(delayed(fail_unpicklably)(i) for i in range(4))
    assert raised.value.type_name == "test_backend.NeedsTwoArguments"
    assert raised.value.message == "42: no way back"
    assert "fail_unpicklably" in raised.value.__cause__.text


def test_closures_and_lambdas_travel_by_value(dispatch: FakeDispatch) -> None:
    offset = 1000
    results = Parallel(n_jobs=-1)(delayed(lambda x: (x + offset, os.getpid()))(i) for i in range(20))
    assert [value for value, _ in results] == [i + 1000 for i in range(20)]
    assert os.getpid() not in {pid for _, pid in results}


def test_parallel_inside_a_batch_runs_locally_with_threads(dispatch: FakeDispatch) -> None:
    results = Parallel(n_jobs=-1)(delayed(inner_parallel)(i) for i in range(8))
    assert [total for _, total, _ in results] == [sum(range(i + 2)) for i in range(8)]
    assert {name for name, _, _ in results} == {"ThreadingBackend"}
    assert os.getpid() not in {pid for _, _, pid in results}
    # Only the outer batches went through nested dispatch (the children have no fake to call).
    assert len(dispatch.submitted) <= 8


def test_batches_are_dispatched_in_the_task_context(dispatch: FakeDispatch) -> None:
    """Later batches are dispatched from completion callbacks: still in the calling task's context."""
    token = task_marker.set("task-7")
    try:
        Parallel(n_jobs=2, batch_size=1, pre_dispatch="2")(delayed(slow)(0.01) for _ in range(12))
    finally:
        task_marker.reset(token)
    assert len(dispatch.submitted) == 12
    assert set(dispatch.submitted) == {"task-7"}


def test_a_timeout_is_raised_in_the_caller(dispatch: FakeDispatch) -> None:
    with pytest.raises((TimeoutError, multiprocessing.TimeoutError)):
        Parallel(n_jobs=2, timeout=0.3)(delayed(slow)(s) for s in (0.0, 1.5))


def test_a_managed_parallel_reuses_the_backend_across_calls(dispatch: FakeDispatch) -> None:
    with Parallel(n_jobs=-1) as parallel:
        first = parallel(delayed(square_and_pid)(i) for i in range(10))
        second = parallel(delayed(square_and_pid)(i) for i in range(10, 20))
    assert [value for value, _ in first + second] == [i * i for i in range(20)]


def test_results_can_be_generated_unordered(dispatch: FakeDispatch) -> None:
    # return_as="generator_unordered" needs joblib >= 1.4: scripts/toolchain.sh installs it into the
    # test environment.
    assert JOBLIB_VERSION >= (1, 4), f"joblib {joblib.__version__} has no generator_unordered (the tests need >= 1.4)"
    generator = Parallel(n_jobs=-1, return_as="generator_unordered")(
        delayed(square_and_pid)(i) for i in range(30)
    )
    assert sorted(value for value, _ in generator) == [i * i for i in range(30)]


def test_grid_search_gives_the_same_result_as_a_local_run(dispatch: FakeDispatch) -> None:
    # scikit-learn is a prerequisite of these tests (Debian's python3-sklearn, seen by the test
    # environment): without it this fails, never skips.
    from sklearn.datasets import load_iris
    from sklearn.model_selection import GridSearchCV
    from sklearn.svm import SVC

    X, y = load_iris(return_X_y=True)
    grid = {"C": [0.1, 1, 10], "kernel": ["linear", "rbf"]}
    distributed = GridSearchCV(SVC(), grid, cv=3, n_jobs=-1).fit(X, y)
    assert len(dispatch.submitted) >= 1
    with joblib.parallel_backend("sequential"):
        local = GridSearchCV(SVC(), grid, cv=3, n_jobs=1).fit(X, y)
    assert distributed.best_params_ == local.best_params_
    assert distributed.best_score_ == pytest.approx(local.best_score_)


def test_nested_dispatch_follows_the_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    """``_submit`` and ``_capacity`` call ``skyward.dispatch`` as the worker-module contract says."""
    calls: List[tuple] = []
    fake = types.ModuleType("skyward.dispatch")

    def submit(fn: str, args: list = (), kwargs: dict | None = None, node: int | None = None) -> Future:
        calls.append((fn, list(args), kwargs, node))
        return Future()

    fake.submit = submit  # type: ignore[attr-defined]
    fake.capacity = lambda: 6  # type: ignore[attr-defined]
    if "skyward" not in sys.modules:
        monkeypatch.setitem(sys.modules, "skyward", types.ModuleType("skyward"))
    monkeypatch.setitem(sys.modules, "skyward.dispatch", fake)
    assert plugin._capacity() == 6
    assert isinstance(plugin._submit(b"payload"), Future)
    assert calls == [("skyward_plugin_joblib:run_batch", [b"payload"], None, None)]
    module_name, qualname = plugin.RUN_BATCH.split(":")
    assert module_name == plugin.__name__ and getattr(plugin, qualname) is plugin.run_batch


def test_run_batch_returns_pickled_outcomes() -> None:
    def batch() -> list:
        return [1, 2, 3]

    def failing() -> list:
        raise KeyError("missing")

    assert plugin._result_of(plugin.run_batch(plugin._dumps(batch))) == [1, 2, 3]
    with pytest.raises(KeyError, match="missing"):
        plugin._result_of(plugin.run_batch(plugin._dumps(failing)))
    # A payload that does not unpickle is an outcome too, not a failed nested task.
    with pytest.raises(pickle.UnpicklingError):
        plugin._result_of(plugin.run_batch(b"not a pickle"))


def test_a_batch_being_sent_as_everything_is_aborted_is_cancelled(monkeypatch: pytest.MonkeyPatch) -> None:
    # joblib aborts (a batch failed) on its own thread while the callback thread sends the next batch:
    # the batch, sent just before the abort, must be cancelled with the others, not start after it.
    backend = plugin.SkywardBackend()
    remotes: List["Future[Any]"] = []

    def submit(payload: bytes) -> "Future[Any]":
        remote: "Future[Any]" = Future()
        remotes.append(remote)
        backend.abort_everything()  # lands after the batch left, before the backend notes it
        return remote

    monkeypatch.setattr(plugin, "_submit", submit)
    monkeypatch.setattr(plugin, "_capacity", lambda: CAPACITY)
    backend.configure(n_jobs=2)
    future = backend.submit(lambda: 1)
    assert len(remotes) == 1
    assert remotes[0].cancelled(), "the batch sent as everything was aborted still runs"
    assert future.cancelled()
    # An abort while the batch waits for a free job: it is never sent.
    monkeypatch.setattr(plugin, "_submit", lambda payload: remotes.append(Future()) or remotes[-1])
    first, second, third = (backend.submit(lambda: 1) for _ in range(3))
    assert len(remotes) == 3  # two sent (n_jobs=2), the third waits
    backend.abort_everything()
    assert all(remote.cancelled() for remote in remotes[1:]) and third.cancelled()
    backend._complete(remotes[1], first, None)  # a completion frees a job: nothing is left to send
    assert len(remotes) == 3
    backend.terminate()
