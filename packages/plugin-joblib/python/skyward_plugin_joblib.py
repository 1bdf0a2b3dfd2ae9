"""The worker side of ``@skyward/plugin-joblib``: a joblib parallel backend that spreads the batches
of a ``Parallel`` call made inside a task over every worker of the pool.

On each worker's first task (``around_app``; ``around_process`` in each executor subprocess) the
backend is registered with joblib as ``"skyward"`` and made joblib's default, so inside tasks::

    Parallel(n_jobs=-1)(delayed(f)(i) for i in range(100))

runs with ``n_jobs = skyward.dispatch.capacity()`` (nodes x concurrency). At most ``n_jobs`` batches
of one call run at once: joblib dispatches batches ahead of time (``pre_dispatch``), and those beyond
``n_jobs`` wait here until a running one completes. Each joblib batch is
pickled with cloudpickle (the copy joblib vendors, or the one newer joblib depends on) and sent
through Skyward's nested dispatch (``skyward.dispatch.submit("skyward_plugin_joblib:run_batch",
args=[payload])``); a nested task unpickles it, runs it and returns its pickled outcome. An
exception raised by a batch is re-raised in the caller as the original exception, its remote
traceback chained as ``__cause__`` (as joblib's process backends do). ``Parallel`` calls made
inside a batch run locally: joblib gives batches its own nested backend (threads at the first level
of nesting, sequential below).
"""

from __future__ import annotations

import collections
import contextlib
import contextvars
import multiprocessing
import pickle
import sys
import threading
import traceback
from concurrent.futures import Future, InvalidStateError, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeoutError
from typing import Any, Callable, ContextManager, Deque, Dict, Iterator, Optional, Set, Tuple

from joblib import parallel as joblib_parallel
from joblib._parallel_backends import (
    AutoBatchingMixin,
    FallbackToBackend,
    ParallelBackendBase,
    SequentialBackend,
)

try:
    from joblib.externals import cloudpickle
except ImportError:  # newer joblib depends on cloudpickle instead of vendoring it
    import cloudpickle  # type: ignore[no-redef]

BACKEND_NAME = "skyward"
"""The name the backend is registered under: ``Parallel(backend="skyward")``."""

RUN_BATCH = "skyward_plugin_joblib:run_batch"
"""The callable nested tasks run: ``run_batch(payload) -> outcome``."""

_OK = "ok"
_ERROR = "error"
_ERROR_TEXT = "error-text"


# -- the nested task ------------------------------------------------------------------------------


class RemoteTraceback(Exception):
    """The traceback of an exception raised in a batch on another worker (its ``__cause__``)."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text}"""'


class RemoteBatchError(RuntimeError):
    """A batch failed with an exception that could not travel back as itself (it does not pickle)."""

    def __init__(self, type_name: str, message: str) -> None:
        super().__init__(f"{type_name}: {message}")
        self.type_name = type_name
        self.message = message


def _dumps(value: Any) -> bytes:
    return cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)


def _type_name(error: BaseException) -> str:
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _error_outcome(error: BaseException) -> bytes:
    text = "".join(traceback.format_exception(type(error), error, error.__traceback__))
    try:
        data = _dumps((_ERROR, error, text))
        # An exception can pickle and still fail to unpickle (a custom __init__ with other arguments).
        pickle.loads(data)
        return data
    except Exception:
        return _dumps((_ERROR_TEXT, _type_name(error), str(error), text))


def run_batch(payload: bytes) -> bytes:
    """Run one pickled joblib batch; return its pickled outcome: the results, or the exception.

    Runs as a nested task on any worker of the pool. Exceptions raised by the batch (or while
    unpickling it, or pickling its results) are part of the outcome, so they reach the caller as
    themselves rather than as a failed task.
    """
    try:
        batch = pickle.loads(payload)
        return _dumps((_OK, batch()))
    except Exception as error:
        return _error_outcome(error)


def _result_of(outcome: bytes) -> Any:
    """The results an outcome holds, or raise the exception it holds."""
    kind, *rest = pickle.loads(outcome)
    if kind == _OK:
        return rest[0]
    if kind == _ERROR:
        error, text = rest
        raise error from RemoteTraceback(text)
    type_name, message, text = rest
    raise RemoteBatchError(type_name, message) from RemoteTraceback(text)


# -- nested dispatch ------------------------------------------------------------------------------


def _submit(payload: bytes) -> "Future[Any]":
    """Send one batch to the pool as a nested task of the running task."""
    from skyward.dispatch import submit

    return submit(RUN_BATCH, args=[payload])


def _capacity() -> int:
    """The pool's task slots (nodes x concurrency): what ``n_jobs=-1`` means."""
    from skyward.dispatch import capacity

    return int(capacity())


# -- the backend ----------------------------------------------------------------------------------


class BatchFuture(Future):  # type: ignore[type-arg]
    """The future of one dispatched batch; also has the ``get`` of joblib's pre-1.3 backends."""

    def get(self, timeout: Optional[float] = None) -> Any:
        try:
            return self.result(timeout=timeout)
        except FutureTimeoutError as error:
            raise multiprocessing.TimeoutError() from error


class SkywardBackend(AutoBatchingMixin, ParallelBackendBase):
    """A joblib backend whose workers are the Skyward pool's task slots.

    Implements joblib's backend API for both its current form (``submit`` and
    ``retrieve_result_callback``) and the one before joblib 1.3 (``apply_async`` returning an
    object with ``get``). Batches are sized automatically, as with joblib's process backends,
    because each one is a round trip through the client.

    ``n_jobs`` is a limit on concurrency, as with joblib's own backends: at most ``n_jobs`` batches
    are sent to the pool at once; the batches joblib hands over ahead of time (``pre_dispatch``)
    wait in this process, in order, for a running one to complete.
    """

    supports_retrieve_callback = True
    supports_timeout = True
    supports_sharedmem = False
    uses_threads = False
    default_n_jobs = 1

    def __init__(
        self,
        nesting_level: Optional[int] = None,
        inner_max_num_threads: Optional[int] = None,
        **backend_kwargs: Any,
    ) -> None:
        super().__init__(
            nesting_level=nesting_level, inner_max_num_threads=inner_max_num_threads, **backend_kwargs
        )
        self.parallel: Any = None
        self._lock = threading.Lock()
        self._pending: Dict[BatchFuture, "Future[Any]"] = {}
        # Batches being sent (their job taken, not in _pending yet): an abort cancels them too,
        # noting them in _aborted so their remote is cancelled as soon as it is out.
        self._sending: Set[BatchFuture] = set()
        self._aborted: Set[BatchFuture] = set()
        # Batches handed over by joblib but not sent yet: n_jobs are running already.
        self._waiting: Deque[Tuple[bytes, BatchFuture, Optional[Callable[[Any], Any]]]] = collections.deque()
        self._running = 0
        self._n_jobs = 1
        self._context: Optional[contextvars.Context] = None
        self._callbacks: Optional[ThreadPoolExecutor] = None

    def effective_n_jobs(self, n_jobs: Optional[int]) -> int:
        if n_jobs == 0:
            raise ValueError("n_jobs == 0 in Parallel has no meaning")
        if n_jobs is None:
            return 1
        capacity = _capacity()
        if n_jobs < 0:
            return max(capacity + 1 + n_jobs, 1)
        # The pool's slots are all that can run at once (as joblib's Dask backend reports its
        # cluster's cores): more jobs than slots means every slot.
        return max(min(n_jobs, capacity), 1)

    def configure(
        self,
        n_jobs: Optional[int] = 1,
        parallel: Any = None,
        prefer: Optional[str] = None,
        require: Optional[str] = None,
        **backend_kwargs: Any,
    ) -> int:
        n_jobs = self.effective_n_jobs(n_jobs)
        if n_jobs == 1:
            # One job gains nothing from a round trip: run it here, as joblib does.
            raise FallbackToBackend(SequentialBackend(nesting_level=self.nesting_level))
        self.parallel = parallel
        self._n_jobs = n_jobs
        # Batches complete on Skyward's threads; joblib's callback (which dispatches the next
        # batches) runs on a thread of our own, in the task's context so nested dispatch knows
        # which task the batches belong to and their output goes to that task.
        self._context = contextvars.copy_context()
        if self._callbacks is None:
            self._callbacks = ThreadPoolExecutor(max_workers=1, thread_name_prefix="skyward-joblib")
        return n_jobs

    def submit(self, func: Callable[[], Any], callback: Optional[Callable[[Any], Any]] = None) -> BatchFuture:
        """Send one batch to the pool, or queue it while ``n_jobs`` batches are running;
        ``callback(future)`` runs when it has completed."""
        payload = _dumps(func)
        future = BatchFuture()
        with self._lock:
            if self._running >= self._n_jobs:
                self._waiting.append((payload, future, callback))
                return future
            self._running += 1
            self._sending.add(future)
        self._send(payload, future, callback)
        return future

    # joblib < 1.5 calls it this.
    apply_async = submit

    def _send(self, payload: bytes, future: BatchFuture, callback: Optional[Callable[[Any], Any]]) -> None:
        """Sends one batch (its slot among the ``n_jobs`` already taken, the batch in ``_sending``).
        One aborted while it was being sent is cancelled as soon as it is out, never left to run."""
        try:
            remote = _submit(payload)
        except BaseException:
            with self._lock:
                self._running -= 1
                self._sending.discard(future)
                self._aborted.discard(future)
            raise
        with self._lock:
            self._sending.discard(future)
            aborted = future in self._aborted
            self._aborted.discard(future)
            if not aborted:
                self._pending[future] = remote
        if aborted:
            remote.cancel()
        remote.add_done_callback(lambda done: self._schedule(done, future, callback))

    def _send_next(self) -> None:
        """A running batch completed: its slot goes to the longest-waiting batch, if any."""
        with self._lock:
            self._running -= 1
            if not self._waiting:
                return
            payload, future, callback = self._waiting.popleft()
            self._running += 1
            self._sending.add(future)
        try:
            self._send(payload, future, callback)
        except BaseException as error:  # noqa: BLE001 - handed to joblib through the batch's future
            try:
                future.set_exception(error)
            except InvalidStateError:
                return
            if callback is not None:
                callback(future)

    def retrieve_result_callback(self, out: BatchFuture) -> Any:
        return out.result()

    def retrieve_result(self, out: BatchFuture, timeout: Optional[float] = None) -> Any:
        return out.get(timeout=timeout)

    def abort_everything(self, ensure_ready: bool = True) -> None:
        # Cancelling a nested dispatch future stops its nested task too, wherever it runs.
        with self._lock:
            pending = list(self._pending.items())
            self._pending.clear()
            waiting = [future for _, future, _ in self._waiting]
            self._waiting.clear()
            sending = list(self._sending)
            self._aborted.update(sending)  # _send looks (under the lock) once its batch is out
        for future in sending:
            future.cancel()
        for future in waiting:
            future.cancel()
        for future, remote in pending:
            remote.cancel()
            future.cancel()

    def terminate(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        if callbacks is not None:
            # Callbacks already queued still run; nothing waits for them here.
            callbacks.shutdown(wait=False)
        self.reset_batch_stats()

    def _schedule(
        self, done: "Future[Any]", future: BatchFuture, callback: Optional[Callable[[Any], Any]]
    ) -> None:
        context = (self._context or contextvars.copy_context()).copy()
        callbacks = self._callbacks
        if callbacks is not None:
            try:
                callbacks.submit(context.run, self._complete, done, future, callback)
                return
            except RuntimeError:
                pass  # shut down meanwhile
        context.run(self._complete, done, future, callback)

    def _complete(
        self, done: "Future[Any]", future: BatchFuture, callback: Optional[Callable[[Any], Any]]
    ) -> None:
        with self._lock:
            self._pending.pop(future, None)
        # Free the slot first: the next batch starts while joblib handles this one's results.
        self._send_next()
        failure: Optional[BaseException] = None
        result: Any = None
        try:
            result = _result_of(done.result())
        except BaseException as error:  # noqa: BLE001 - handed to joblib, which re-raises it
            failure = error
        try:
            if failure is None:
                future.set_result(result)
            else:
                future.set_exception(failure)
        except InvalidStateError:
            return  # cancelled by abort_everything: joblib is no longer waiting for it
        if callback is not None:
            try:
                callback(future)
            except Exception:
                traceback.print_exc(file=sys.stderr)


# -- worker hooks ---------------------------------------------------------------------------------


@contextlib.contextmanager
def skyward_backend() -> Iterator[None]:
    """Register the backend and make it joblib's default; restore the previous default on exit."""
    previous = joblib_parallel.DEFAULT_BACKEND
    joblib_parallel.register_parallel_backend(BACKEND_NAME, SkywardBackend, make_default=True)
    try:
        yield
    finally:
        joblib_parallel.DEFAULT_BACKEND = previous


def around_app(info: Any, config: Dict[str, Any]) -> ContextManager[None]:
    """Entered once per worker: ``Parallel`` calls in its tasks use the pool."""
    return skyward_backend()


def around_process(info: Any, config: Dict[str, Any]) -> ContextManager[None]:
    """Entered once per executor subprocess (``executor="process"``): the same, there."""
    return skyward_backend()
