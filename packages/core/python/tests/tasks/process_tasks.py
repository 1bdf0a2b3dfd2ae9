"""Tasks for test_task_processes: processes a task starts, which must not outlive its worker."""

import os
import subprocess
import sys
import time

_IGNORING_TERM = (
    "import signal, sys, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "sys.stdout.write('ready\\n'); sys.stdout.flush()\n"
    "time.sleep(1000)\n"
)


def start_processes():
    """Starts, and leaves running, the kinds of processes a task starts: a plain child, one in a
    session of its own (as torchrun starts its workers), one a shell left behind in the background
    (its parent gone at once), and one that ignores SIGTERM. Their pids, by kind."""
    plain = subprocess.Popen(["sleep", "1000"])
    own_session = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    background = subprocess.run(["sh", "-c", "sleep 1000 >/dev/null 2>&1 & echo $!"], capture_output=True,
                                text=True, check=True)
    stubborn = subprocess.Popen([sys.executable, "-c", _IGNORING_TERM], stdout=subprocess.PIPE, text=True)
    assert stubborn.stdout is not None and stubborn.stdout.readline() == "ready\n"
    return {"plain": plain.pid, "own_session": own_session.pid, "background": int(background.stdout),
            "ignores_sigterm": stubborn.pid}


def start_outside(variable):
    """Starts a process without ``variable`` in its environment, in a session of its own: the
    documented way to start one that outlives the worker. Its pid."""
    environment = {key: value for key, value in os.environ.items() if key != variable}
    return subprocess.Popen(["sleep", "1000"], env=environment, start_new_session=True).pid


def start_then_wait(marker):
    """Starts a ``sleep`` child, writes its pid to ``marker``, then waits (the task keeps running)."""
    child = subprocess.Popen(["sleep", "1000"])
    with open(marker, "w") as out:
        out.write(str(child.pid))
    while True:
        time.sleep(1)



def start_own_session_then(marker, then):
    """Starts a ``sleep`` in a session of its own, writes its pid to ``marker``, then waits (``then``
    "wait": until stopped) or ends its process at once (``then`` "exit", as a crash would)."""
    child = subprocess.Popen(["sleep", "1000"], start_new_session=True)
    with open(marker, "w") as out:
        out.write(str(child.pid))
    if then == "exit":
        os._exit(3)
    while True:
        time.sleep(1)
