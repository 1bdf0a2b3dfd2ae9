"""Telemetry collectors sampled on the worker (docs/protocol.md, "Metrics").

The ``cluster`` message names the collectors (``image.metrics`` on the client); each is sampled on
its own interval and every sample goes to the client as a ``metric`` message. Standard library only:

- ``cpu`` (percent of all cores busy, from two readings of ``/proc/stat``), ``memory`` (percent of
  RAM in use), ``memory_used`` and ``memory_total`` (bytes), from ``/proc/meminfo``: in use is
  ``MemTotal - MemAvailable``;
- ``disk``: percent used of the filesystem holding a path, as ``df`` counts it (``os.statvfs``);
- ``network_rx`` / ``network_tx``: bytes per second over every interface but ``lo``, from
  ``/proc/net/dev``;
- ``gpu``, ``gpu_memory``, ``gpu_memory_total`` (bytes) and ``gpu_temp`` (°C), one sample per GPU
  index: one long-running ``nvidia-smi --query-gpu=index,… --format=csv,noheader,nounits
  --loop-ms=N`` per interval, so that NVML is set up once instead of at every sample (a fresh
  ``nvidia-smi`` costs tens of milliseconds of CPU). Without ``nvidia-smi`` they report nothing;
- ``custom``: a shell command run at every sample, its standard output a number.

The first ``cpu`` and network samples come one interval after the start (they are differences).
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import time
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

#: emit(name, value, unit, gpu index or None)
Emit = Callable[[str, float, Optional[str], Optional[int]], None]
Log = Callable[[str], None]

#: the nvidia-smi field, unit and scale of each GPU collector
GPU_FIELDS: Dict[str, Tuple[str, str, float]] = {
    "gpu": ("utilization.gpu", "%", 1.0),
    "gpu_memory": ("memory.used", "B", 1024.0 * 1024.0),  # nvidia-smi reports MiB
    "gpu_memory_total": ("memory.total", "B", 1024.0 * 1024.0),
    "gpu_temp": ("temperature.gpu", "°C", 1.0),
}
PROC_KINDS = ("cpu", "memory", "memory_used", "memory_total", "disk", "network_rx", "network_tx")
#: the shortest interval, seconds: the client refuses shorter ones, and a worker told one anyway does
#: not sample in a busy loop (the collector is dropped like any other malformed one)
MIN_INTERVAL = 0.1
#: seconds a custom command may run, at least (longer when its interval is longer)
CUSTOM_TIME_LIMIT = 10.0
#: seconds before a failed nvidia-smi loop is started again
GPU_RESTART_DELAY = 30.0


def parse_collectors(value: Any) -> List[Dict[str, Any]]:
    """The collectors of a ``cluster`` message's ``metrics`` (absent or ``null``: none); malformed ones are dropped."""
    if not isinstance(value, list):
        return []
    collectors: List[Dict[str, Any]] = []
    for entry in value:
        if not isinstance(entry, dict):
            continue
        kind, name, interval = entry.get("collector"), entry.get("name"), entry.get("interval")
        if not isinstance(kind, str) or not isinstance(name, str):
            continue
        if not isinstance(interval, (int, float)) or isinstance(interval, bool) or not interval >= MIN_INTERVAL:
            continue
        if kind not in PROC_KINDS and kind not in GPU_FIELDS and kind != "custom":
            continue
        if kind == "disk" and not isinstance(entry.get("path"), str):
            continue
        if kind == "custom" and not isinstance(entry.get("command"), str):
            continue
        collectors.append(dict(entry, interval=float(interval)))
    return collectors


# -- /proc readings ------------------------------------------------------------------------------------


def read_cpu_times(path: str = "/proc/stat") -> Tuple[int, int]:
    """(busy, total) jiffies of all cores; guest time is already counted in user time."""
    with open(path, "rb") as handle:
        fields = handle.readline().split()[1:9]
    values = [int(field) for field in fields]
    total = sum(values)
    idle = values[3] + (values[4] if len(values) > 4 else 0)  # idle + iowait
    return total - idle, total


def read_memory(path: str = "/proc/meminfo") -> Tuple[int, int]:
    """(used, total) bytes: used is total minus available."""
    found: Dict[bytes, int] = {}
    with open(path, "rb") as handle:
        for line in handle:
            key, _, rest = line.partition(b":")
            if key in (b"MemTotal", b"MemAvailable", b"MemFree", b"Buffers", b"Cached"):
                found[key] = int(rest.split()[0]) * 1024
    total = found[b"MemTotal"]
    available = found.get(b"MemAvailable")
    if available is None:  # kernels before 3.14
        available = found.get(b"MemFree", 0) + found.get(b"Buffers", 0) + found.get(b"Cached", 0)
    return total - available, total


def read_network(path: str = "/proc/net/dev") -> Tuple[int, int]:
    """(received, sent) bytes over every interface but the loopback."""
    received = sent = 0
    with open(path, "rb") as handle:
        for line in handle.readlines()[2:]:
            name, _, counters = line.partition(b":")
            if name.strip() == b"lo":
                continue
            fields = counters.split()
            if len(fields) >= 9:
                received += int(fields[0])
                sent += int(fields[8])
    return received, sent


def disk_percent(path: str) -> float:
    """Percent used of the filesystem holding ``path``, as ``df`` computes it."""
    stats = os.statvfs(path)
    used = stats.f_blocks - stats.f_bfree
    usable = used + stats.f_bavail
    return 100.0 * used / usable if usable > 0 else 0.0


# -- the sampler -----------------------------------------------------------------------------------------


class _ProcCollector:
    """One collector read from ``/proc`` (or ``statvfs``) on the loop, in microseconds."""

    def __init__(self, spec: Dict[str, Any]) -> None:
        self.kind: str = spec["collector"]
        self.name: str = spec["name"]
        self.path: str = spec.get("path") or "/"
        self.previous: Optional[Tuple[float, float, float]] = None
        self.failed = False
        if self.kind in ("cpu", "network_rx", "network_tx"):
            try:
                self.previous = self._counters()
            except (OSError, ValueError, IndexError):
                self.previous = None

    def _counters(self) -> Tuple[float, float, float]:
        now = time.monotonic()
        if self.kind == "cpu":
            busy, total = read_cpu_times()
            return now, float(busy), float(total)
        received, sent = read_network()
        return now, float(received), float(sent)

    def sample(self) -> Optional[Tuple[float, str]]:
        kind = self.kind
        if kind == "cpu":
            current = self._counters()
            previous, self.previous = self.previous, current
            if previous is None or current[2] <= previous[2]:
                return None
            return 100.0 * (current[1] - previous[1]) / (current[2] - previous[2]), "%"
        if kind in ("network_rx", "network_tx"):
            current = self._counters()
            previous, self.previous = self.previous, current
            if previous is None or current[0] <= previous[0]:
                return None
            column = 1 if kind == "network_rx" else 2
            return max(0.0, current[column] - previous[column]) / (current[0] - previous[0]), "B/s"
        if kind == "disk":
            return disk_percent(self.path), "%"
        used, total = read_memory()
        if kind == "memory":
            return 100.0 * used / total, "%"
        return float(used if kind == "memory_used" else total), "B"


class MetricsSampler:
    """Samples the configured collectors on the worker's loop until :meth:`stop`."""

    def __init__(self, loop: asyncio.AbstractEventLoop, emit: Emit, log: Log) -> None:
        self.loop = loop
        self._emit = emit
        self._log = log
        self._collectors: List[Dict[str, Any]] = []
        self._timers: List[asyncio.TimerHandle] = []
        self._tasks: List[asyncio.Task[Any]] = []
        self._processes: List[asyncio.subprocess.Process] = []
        self._stopped = True

    @property
    def collectors(self) -> List[Dict[str, Any]]:
        return list(self._collectors)

    def configure(self, collectors: Sequence[Dict[str, Any]]) -> None:
        """Samples ``collectors`` from now on (the same list again changes nothing)."""
        collectors = list(collectors)
        if collectors == self._collectors and not self._stopped:
            return
        self.stop()
        self._collectors = collectors
        self._stopped = False
        by_interval: Dict[float, List[_ProcCollector]] = {}
        gpu_by_interval: Dict[float, List[str]] = {}
        for spec in collectors:
            kind, interval = spec["collector"], spec["interval"]
            if kind in PROC_KINDS:
                by_interval.setdefault(interval, []).append(_ProcCollector(spec))
            elif kind in GPU_FIELDS:
                kinds = gpu_by_interval.setdefault(interval, [])
                if kind not in kinds:
                    kinds.append(kind)
            else:
                self._tasks.append(self.loop.create_task(self._run_custom(spec)))
        for interval, group in by_interval.items():
            self._schedule(interval, group)
        if gpu_by_interval and shutil.which("nvidia-smi") is not None:
            for interval, kinds in gpu_by_interval.items():
                self._tasks.append(self.loop.create_task(self._run_gpu(interval, kinds)))

    def stop(self) -> None:
        self._stopped = True
        for timer in self._timers:
            timer.cancel()
        self._timers = []
        for task in self._tasks:
            task.cancel()
        self._tasks = []
        for process in self._processes:
            _kill(process)
        self._processes = []

    # -- /proc collectors, one timer per interval ---------------------------------------------------

    def _schedule(self, interval: float, group: List[_ProcCollector]) -> None:
        index = len(self._timers)
        self._timers.append(self.loop.call_later(interval, self._tick, interval, group, index))

    def _tick(self, interval: float, group: List[_ProcCollector], index: int) -> None:
        if self._stopped:
            return
        for collector in group:
            try:
                sampled = collector.sample()
            except (OSError, ValueError, IndexError, KeyError, ZeroDivisionError) as error:
                if not collector.failed:
                    collector.failed = True
                    where = f" ({collector.path})" if collector.kind == "disk" else ""
                    self._log(f"metric {collector.name}{where} cannot be read: {error!r}")
                continue
            if sampled is not None:
                self._emit(collector.name, sampled[0], sampled[1], None)
        self._timers[index] = self.loop.call_later(interval, self._tick, interval, group, index)

    # -- GPU collectors: one nvidia-smi loop per interval -------------------------------------------

    async def _run_gpu(self, interval: float, kinds: List[str]) -> None:
        fields = ",".join(["index"] + [GPU_FIELDS[kind][0] for kind in kinds])
        milliseconds = max(1, int(round(interval * 1000)))
        command = [
            "nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader,nounits", f"--loop-ms={milliseconds}",
        ]
        reported = False
        while not self._stopped:
            try:
                process = await asyncio.create_subprocess_exec(
                    *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                    stderr=asyncio.subprocess.PIPE, start_new_session=True,
                )
            except OSError as error:
                if not reported:
                    self._log(f"GPU metrics: cannot run nvidia-smi: {error!r}")
                    reported = True
                await asyncio.sleep(GPU_RESTART_DELAY)
                continue
            self._processes.append(process)
            try:
                assert process.stdout is not None
                while True:
                    line = await process.stdout.readline()
                    if not line:
                        break
                    self._gpu_line(line, kinds)
                stderr = await process.stderr.read() if process.stderr is not None else b""
                code = await process.wait()
            finally:
                if process in self._processes:
                    self._processes.remove(process)
                _kill(process)
            if self._stopped:
                return
            if not reported:
                tail = stderr.decode(errors="replace").strip()[-300:]
                self._log(f"GPU metrics: nvidia-smi exited with code {code}{': ' + tail if tail else ''}")
                reported = True
            await asyncio.sleep(GPU_RESTART_DELAY)

    def _gpu_line(self, line: bytes, kinds: List[str]) -> None:
        values = [value.strip() for value in line.decode(errors="replace").split(",")]
        if len(values) != len(kinds) + 1:
            return
        try:
            index = int(values[0])
        except ValueError:
            return
        for kind, text in zip(kinds, values[1:]):
            try:
                value = float(text)  # "[N/A]", "[Not Supported]": nothing to report
            except ValueError:
                continue
            _field, unit, scale = GPU_FIELDS[kind]
            self._emit(kind, value * scale, unit, index)

    # -- custom commands ------------------------------------------------------------------------------

    async def _run_custom(self, spec: Dict[str, Any]) -> None:
        name, command, interval = spec["name"], spec["command"], spec["interval"]
        limit = max(CUSTOM_TIME_LIMIT, interval)
        reported = False
        while not self._stopped:
            await asyncio.sleep(interval)
            problem: Optional[str] = None
            try:
                process = await asyncio.create_subprocess_exec(
                    "/bin/sh", "-c", command, stdin=asyncio.subprocess.DEVNULL,
                    stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
                )
            except OSError as error:
                problem = f"cannot run: {error!r}"
            else:
                self._processes.append(process)
                try:
                    stdout, stderr = await asyncio.wait_for(process.communicate(), limit)
                except asyncio.TimeoutError:
                    problem = f"ran past {limit:g} s and was killed"
                    stdout = stderr = b""
                finally:
                    if process in self._processes:
                        self._processes.remove(process)
                    _kill(process)
                if problem is None:
                    text = stdout.decode(errors="replace").strip()
                    if process.returncode != 0:
                        tail = stderr.decode(errors="replace").strip()[-200:]
                        problem = f"exited with code {process.returncode}{': ' + tail if tail else ''}"
                    else:
                        try:
                            self._emit(name, float(text), None, None)
                            continue
                        except ValueError:
                            problem = f"printed {text[:80]!r}, not a number"
            if problem is not None and not reported:
                self._log(f"custom metric {name!r} ({command}): {problem}")
                reported = True


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            process.kill()
        except ProcessLookupError:
            pass
