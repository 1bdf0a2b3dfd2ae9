"""Commands and scripts as tasks: the built-in functions behind ``sky.shell`` and ``sky.script``.

Each runs one subprocess and streams its output, as it arrives, into the task's own stdout and
stderr (so it reaches the client as the task's output, like ``print``). The result is
``{"exitCode", "signal", "stdout", "stderr"}`` — the last :data:`RESULT_TAIL` characters of each
stream; a non-zero exit raises :class:`CommandFailedError`, whose message the client turns into
its typed ``CommandFailedError``. A cancelled or timed-out task takes its subprocess (and
everything that started) down with it.
"""

from __future__ import annotations

import codecs
import collections
import contextvars
import os
import signal
import subprocess
import sys
import threading
from typing import IO, Any, Callable, Deque, Dict, List, Mapping, Sequence

from .context import current_task

RESULT_TAIL = 64 * 1024
"""Characters of each stream kept for the result (the whole output is streamed as task output)."""

ERROR_TAIL = 4 * 1024
"""Characters of the interleaved output kept for :class:`CommandFailedError`."""

OUTPUT_MARKER = "\n--- output (tail) ---\n"
"""Separates the first line of a :class:`CommandFailedError` message from the output tail (the
client splits the message here)."""

_POLL_INTERVAL = 0.1
_TERMINATE_GRACE = 2.0


class CommandFailedError(RuntimeError):
    """A command or script exited with a non-zero status (or was killed by a signal).

    The message's first line is ``<label> exited with code N`` or ``<label> was killed by SIGNAME
    (exit code 128+n)``; the tail of the output follows :data:`OUTPUT_MARKER`.
    """

    def __init__(self, label: str, exit_code: int, signal_name: str | None, output_tail: str,
                 stdout: str, stderr: str) -> None:
        if signal_name is None:
            head = f"{label} exited with code {exit_code}"
        else:
            head = f"{label} was killed by {signal_name} (exit code {exit_code})"
        super().__init__(head + (OUTPUT_MARKER + output_tail if output_tail else ""))
        self.exit_code = exit_code
        self.signal = signal_name
        self.output_tail = output_tail
        self.stdout = stdout
        self.stderr = stderr


class _Tail:
    """The last ``limit`` characters written to it."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._parts: Deque[str] = collections.deque()
        self._size = 0

    def add(self, text: str) -> None:
        self._parts.append(text)
        self._size += len(text)
        while self._size - len(self._parts[0]) >= self._limit:
            self._size -= len(self._parts.popleft())

    def text(self) -> str:
        return "".join(self._parts)[-self._limit:]


def _in_process_child() -> bool:
    """True in a process-executor child: it leads its own session, which the executor kills as a
    whole on cancel or timeout, so a subprocess left in it dies with it."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return getattr(spec, "name", None) == "skyward.child" and os.getsid(0) == os.getpid()


def _kill_group(process: subprocess.Popen[bytes], sig: int) -> None:
    try:
        os.killpg(process.pid, sig)
    except (ProcessLookupError, PermissionError):
        try:
            process.send_signal(sig)
        except ProcessLookupError:
            pass


def _stop(process: subprocess.Popen[bytes], own_group: bool) -> None:
    """SIGTERM the subprocess (its whole group when it has one), then SIGKILL after a grace."""
    if own_group:
        _kill_group(process, signal.SIGTERM)
    elif process.poll() is None:
        process.terminate()
    try:
        process.wait(_TERMINATE_GRACE)
    except subprocess.TimeoutExpired:
        pass
    if own_group:
        _kill_group(process, signal.SIGKILL)  # whatever it started, even once it has exited itself
    elif process.poll() is None:
        process.kill()
    process.wait()


def _pump(pipe: IO[bytes], target: Any, result_tail: _Tail, error_tail: _Tail, lock: threading.Lock) -> None:
    """Copy one pipe, as chunks arrive, to the task's stream and the tails."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    reader = getattr(pipe, "read1", pipe.read)
    while True:
        data = reader(65536)
        text = decoder.decode(data, final=not data)
        if text:
            result_tail.add(text)
            with lock:
                error_tail.add(text)
            target.write(text)
            target.flush()
        if not data:
            return


def _start(popen: Callable[[], subprocess.Popen[bytes]], own_group: bool) -> subprocess.Popen[bytes]:
    """Starts the process on a thread of its own. A thread-executor task's interrupt lands in the
    task's thread at its next bytecode: inside ``Popen`` (after the fork, while it waits for the
    exec) it would leave a running process nobody holds, which a cancelled task's command then
    outlived (seen under load: the task reported cancelled, its ``sleep`` alive). The interrupt
    comes once; after it, this waits for the start and stops what it started."""
    started: Dict[str, Any] = {}
    done = threading.Event()

    def run() -> None:
        try:
            started["process"] = popen()
        except BaseException as error:  # noqa: BLE001 — handed to the task's thread below
            started["error"] = error
        finally:
            done.set()

    thread = threading.Thread(target=run, name="skyward-command-start", daemon=True)
    try:
        thread.start()
        done.wait()
    except BaseException:
        # 30 s only if the interrupt came before the thread could start (then nothing was started)
        done.wait(30)
        if "process" in started:
            _stop(started["process"], own_group)
        raise
    if "error" in started:
        raise started["error"]
    return started["process"]


def _run(argv: Sequence[str], label: str, env: Mapping[str, str] | None, cwd: str | None) -> Dict[str, Any]:
    environment = None
    if env:
        environment = dict(os.environ)
        environment.update(env)
    own_group = not _in_process_child()
    process = _start(
        lambda: subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=environment,
            cwd=cwd,
            start_new_session=own_group,
        ),
        own_group,
    )
    stdout_tail, stderr_tail, error_tail = _Tail(RESULT_TAIL), _Tail(RESULT_TAIL), _Tail(ERROR_TAIL)
    lock = threading.Lock()
    pumps: List[threading.Thread] = []
    task = current_task.get()
    # From here on anything that ends this call stops the process: a thread-executor task's
    # interrupt can arrive while the pumps' threads start (long under load), and the command would
    # otherwise run on, unowned, after its task was cancelled.
    try:
        for pipe, target, tail in ((process.stdout, sys.stdout, stdout_tail), (process.stderr, sys.stderr, stderr_tail)):
            assert pipe is not None
            # each pump runs in a copy of this context, so its writes are routed to this task's output
            context = contextvars.copy_context()
            thread = threading.Thread(
                target=context.run, args=(_pump, pipe, target, tail, error_tail, lock),
                name="skyward-command-output", daemon=True,
            )
            thread.start()
            pumps.append(thread)
        while True:
            try:
                process.wait(_POLL_INTERVAL)
                break
            except subprocess.TimeoutExpired:
                # a thread-executor task that was cancelled or timed out is abandoned, not stopped
                if task is not None and task.abandoned:
                    _stop(process, own_group)
                    break
        for thread in pumps:
            thread.join()
    except BaseException:
        _stop(process, own_group)
        raise
    finally:
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    code = process.returncode
    signal_name = None
    if code < 0:
        try:
            signal_name = signal.Signals(-code).name
        except ValueError:
            signal_name = f"signal {-code}"
        code = 128 - code
    if code != 0:
        raise CommandFailedError(label, code, signal_name, error_tail.text(), stdout_tail.text(), stderr_tail.text())
    return {"exitCode": code, "signal": signal_name, "stdout": stdout_tail.text(), "stderr": stderr_tail.text()}


def _check_env(env: Mapping[str, str] | None) -> None:
    if env is None:
        return
    if not isinstance(env, Mapping):
        raise TypeError(f"env must be a mapping of strings, not {type(env).__name__}")
    for key, value in env.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise TypeError(f"env[{key!r}] must be a string, not {type(value).__name__}")


def run_shell(command: str, env: Mapping[str, str] | None = None, cwd: str | None = None) -> Dict[str, Any]:
    """Run ``command`` with ``sh -c`` in the worker's working directory (or ``cwd``)."""
    if not isinstance(command, str) or not command.strip():
        raise TypeError("command must be a non-empty string")
    _check_env(env)
    label = command if len(command) <= 80 else command[:77] + "..."
    return _run(["/bin/sh", "-c", command], f"`{label}`", env, cwd)


def run_script(path: str, args: Sequence[str] = (), env: Mapping[str, str] | None = None,
               cwd: str | None = None) -> Dict[str, Any]:
    """Run the script at ``path`` (relative to the worker's working directory, where ``includes``
    land) with ``args`` as its argv, never through a shell: a ``.py`` file with this worker's Python,
    any other file executed directly (it needs its execute bit and, for a script, a ``#!`` line)."""
    if not isinstance(path, str) or not path:
        raise TypeError("path must be a non-empty string")
    argv = list(args)
    for index, arg in enumerate(argv):
        if not isinstance(arg, str):
            raise TypeError(f"args[{index}] must be a string, not {type(arg).__name__}")
    _check_env(env)
    full = os.path.abspath(path)
    if not os.path.isfile(full):
        raise FileNotFoundError(f"script {path!r} not found (looked for {full}; is it in the image's includes?)")
    if path.endswith(".py"):
        command = [sys.executable, full, *argv]
    elif os.access(full, os.X_OK):
        command = [full, *argv]
    else:
        raise PermissionError(f"script {path!r} is not executable (chmod +x it, or give a .py file)")
    return _run(command, f"script {path}", env, cwd)
