"""Tasks for the nested-dispatch tests: parents that submit subtasks, and the subtasks."""

from __future__ import annotations

import concurrent.futures
import os
import threading
import time
from typing import Any, Dict, List

import skyward as sky
from skyward.dispatch import SubtaskError, capacity, submit
from skyward.protocol import SerializationError


def square(x: int) -> int:
    return x * x


def where() -> Dict[str, Any]:
    return {"thread": threading.current_thread().name, "pid": os.getpid(), "node": sky.instance_info().node}


def fan_out(n: int) -> List[int]:
    futures = [submit("dispatch_tasks:square", args=[i]) for i in range(n)]
    return [future.result(timeout=20) for future in futures]


def fan_out_where(n: int) -> Dict[str, Any]:
    futures = [submit(where) for _ in range(n)]
    return {"parent": where(), "children": [future.result(timeout=20) for future in futures]}


def on_node(node: int) -> Dict[str, Any]:
    return submit("dispatch_tasks:where", node=node).result(timeout=20)


def failing(fn: str, *args: Any) -> Dict[str, Any]:
    try:
        submit(fn, args=args).result(timeout=20)
    except SubtaskError as error:
        return {"kind": error.kind, "type": error.type, "message": error.message, "traceback": error.traceback,
                "node": error.node, "text": str(error)}
    return {}


def pool_capacity() -> int:
    return capacity()


def from_thread(n: int) -> List[int]:
    """Submits from a thread the task started (it has no task context of its own)."""
    results: List[int] = []

    def run() -> None:
        results.extend(future.result(timeout=20) for future in [submit(square, args=[i]) for i in range(n)])

    thread = threading.Thread(target=run)
    thread.start()
    thread.join(30)
    return results


def chained(n: int) -> List[int]:
    """Each result's done-callback submits the next subtask, as joblib's callbacks do."""
    results: List[int] = []
    done = threading.Event()

    def on_done(future: concurrent.futures.Future[Any]) -> None:
        results.append(future.result())
        if len(results) < n:
            submit(square, args=[len(results)]).add_done_callback(on_done)
        else:
            done.set()

    submit(square, args=[0]).add_done_callback(on_done)
    done.wait(20)
    return results


def unsendable_argument() -> str:
    try:
        import threading

        submit(square, args=[threading.Lock()])
    except SerializationError as error:
        return str(error)
    return "sent"


def wait_for_one(marker: str) -> str:
    """Waits on a subtask; writes how the wait ended to ``marker`` (it may be abandoned by then)."""
    future = submit(square, args=[3])
    try:
        outcome = f"value {future.result(timeout=30)}"
    except concurrent.futures.CancelledError:
        outcome = "cancelled"
    except SubtaskError as error:
        outcome = f"{error.kind}: {error.message}"
    with open(marker, "w") as file:
        file.write(outcome)
    return outcome


_left: List[concurrent.futures.Future[Any]] = []


def leave_pending() -> str:
    _left.append(submit(square, args=[5]))
    return "left"


def left_state() -> Dict[str, Any]:
    return {"cancelled": _left[-1].cancelled()}


def sleep_then_square(seconds: float, x: int) -> int:
    time.sleep(seconds)
    return x * x


def one_by_one(n: int) -> List[int]:
    """Subtasks one after another: each finds the node's nested slot free again."""
    return [submit(square, args=[i]).result(timeout=20) for i in range(n)]


def slow_first(n: int, slow: int = 1) -> List[int]:
    """``slow`` slow subtasks, then ``n - slow`` quick ones while they still run."""
    futures = [submit(sleep_then_square, args=[1.0, i]) for i in range(slow)]
    futures += [submit(square, args=[i]) for i in range(slow, n)]
    return [future.result(timeout=20) for future in futures]


def slow_then_own_node() -> Dict[str, Any]:
    """A slow subtask takes this node's nested slot, then one asks for this node: it must run here."""
    own = sky.instance_info().node
    slow = submit(sleep_then_square, args=[1.0, 2])
    here = submit("dispatch_tasks:where", node=own)
    return {"own": own, "ran_on": here.result(timeout=20)["node"], "slow": slow.result(timeout=20)}


def slow_first_nested(n: int) -> List[int]:
    """:func:`slow_first` as a subtask: its own subtasks that do not fit here go as the root's."""
    return submit("dispatch_tasks:slow_first", args=[n]).result(timeout=20)


def leave_running() -> str:
    """Leaves a long subtask running when it returns."""
    _left.append(submit(sleep_then_square, args=[60.0, 1]))
    return "left"


def cancel_then_submit(seconds: float) -> int:
    """Cancels the future of a long subtask (as joblib does after a failed batch), then needs the
    nested slot that subtask held."""
    first = submit(sleep_then_square, args=[seconds, 1])
    time.sleep(0.5)  # running by now, most likely (cancelled while it waits is fine too)
    first.cancel()
    return submit(square, args=[3]).result(timeout=20)
