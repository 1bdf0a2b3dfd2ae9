"""Plugin worker modules: named by the ``cluster`` message, their hooks run around the tasks.

A plugin's worker module may define any of (all optional)::

    def around_app(info: skyward.InstanceInfo, config: dict) -> ContextManager | None
    def around_process(info: skyward.InstanceInfo, config: dict) -> ContextManager | None
    def decorate(fn: Callable, config: dict) -> Callable

``around_app`` is entered once per worker process on its first task, in plugin order, and exited
in reverse when the worker stops; ``around_process`` the same in each process-executor child;
``decorate`` wraps every task function, the first plugin outermost. A hook that raises fails the
task with a :class:`~skyward.execution.PluginError` naming the plugin and the hook; a lifecycle
failure is kept, so every later task of that process fails the same way.
"""

from __future__ import annotations

import importlib
import threading
from typing import Any, Callable, Dict, List, Sequence, Tuple

from . import deferred_interrupts
from .execution import Decorator, Outcome, PluginError, TaskFunction, exception_type_name
from .info import InstanceInfo

__all__ = ["Lifecycle", "PluginError", "PluginLoadError", "PluginModule", "decorators", "load_plugins"]

LIFECYCLE_HOOKS = ("around_app", "around_process")


class PluginLoadError(Exception):
    """A plugin named by ``cluster.plugins`` is malformed or its module cannot be imported."""


class PluginModule:
    """One plugin's imported worker module and its configuration."""

    __slots__ = ("name", "module_name", "config", "module")

    def __init__(self, name: str, module_name: str, config: Dict[str, Any], module: Any) -> None:
        self.name = name
        self.module_name = module_name
        self.config = config
        self.module = module

    def hook(self, hook: str) -> Callable[..., Any] | None:
        function = getattr(self.module, hook, None)
        return function if callable(function) else None

    @property
    def identity(self) -> Tuple[str, str, str]:
        return (self.name, self.module_name, repr(self.config))


def load_plugins(entries: Any) -> List[PluginModule]:
    """Import the modules of ``cluster.plugins`` (``[{"name", "module", "config"}]``), in order."""
    if entries is None:
        return []
    if type(entries) is not list:
        raise PluginLoadError(f"cluster.plugins must be an array, not {type(entries).__name__}")
    plugins = []
    for index, entry in enumerate(entries):
        if type(entry) is not dict:
            raise PluginLoadError(f"cluster.plugins[{index}] must be an object, not {type(entry).__name__}")
        name = entry.get("name")
        module_name = entry.get("module")
        config = entry.get("config")
        if not isinstance(name, str) or not name:
            raise PluginLoadError(f"cluster.plugins[{index}].name must be a non-empty string, not {name!r}")
        if not isinstance(module_name, str) or not module_name:
            raise PluginLoadError(f'plugin "{name}": module must be a non-empty string, not {module_name!r}')
        if config is None:
            config = {}
        if type(config) is not dict:
            raise PluginLoadError(f'plugin "{name}": config must be an object, not {type(config).__name__}')
        try:
            module = importlib.import_module(module_name)
        except BaseException as error:  # an import can raise anything, SystemExit included
            raise PluginLoadError(
                f'plugin "{name}": cannot import its worker module {module_name!r}: '
                f"{exception_type_name(error)}: {error}"
            ) from error
        plugins.append(PluginModule(name, module_name, config, module))
    return plugins


def decorators(plugins: Sequence[PluginModule]) -> List[Decorator]:
    """The plugins' ``decorate`` hooks as task-function decorators, in plugin order."""
    chain: List[Decorator] = []
    for plugin in plugins:
        decorate = plugin.hook("decorate")
        if decorate is not None:
            chain.append(_decorator(plugin, decorate))
    return chain


def _decorator(plugin: PluginModule, decorate: Callable[..., Any]) -> Decorator:
    def apply(fn: TaskFunction) -> TaskFunction:
        try:
            wrapped = decorate(fn, plugin.config)
        except BaseException as error:
            raise PluginError(plugin.name, "decorate", error) from error
        if not callable(wrapped):
            raise PluginError(
                plugin.name, "decorate", TypeError(f"decorate returned {type(wrapped).__name__}, not a function")
            )
        result: TaskFunction = wrapped
        return result

    return apply


class Lifecycle:
    """One lifecycle hook (``around_app`` or ``around_process``) of every plugin.

    :meth:`enter` enters them once, in plugin order, from whichever thread comes first (the
    others wait); if one fails, those already entered are exited and the failure is kept:
    every later :meth:`enter` returns it without trying again. :meth:`exit` exits in reverse.

    Each task that :meth:`enter` let through is inside the hooks until it calls :meth:`leave`.
    :meth:`mark_stale` (the pool's membership changed: a node replaced, added or removed) makes
    the hooks stale: the next :meth:`enter` waits until no task is inside them, exits them, and
    enters them again with the current :class:`InstanceInfo` (a failure kept is tried again).
    """

    def __init__(self, hook: str, info: Callable[[], InstanceInfo | None],
                 log: Callable[[str], None] = lambda text: None) -> None:
        assert hook in LIFECYCLE_HOOKS
        self.hook = hook
        self._log = log
        self._info = info
        self._lock = threading.Lock()
        #: notified when the last task inside the hooks leaves
        self._idle = threading.Condition(self._lock)
        self._users = 0
        #: the hooks were entered with a membership that changed: left and entered again when idle
        self.stale = False
        self._plugins: List[PluginModule] = []
        self._entered: List[Tuple[PluginModule, Any]] = []
        self._failure: Outcome | None = None
        self._started = False
        #: True once entering is over (done, failed, or nothing to enter)
        self.done = True

    def set_plugins(self, plugins: Sequence[PluginModule]) -> bool:
        """Use these plugins; False (and no change) once entering has started."""
        with self._lock:
            if self._started:
                return False
            self._plugins = [plugin for plugin in plugins if plugin.hook(self.hook) is not None]
            self.done = not self._plugins
            return True

    @property
    def failure(self) -> Outcome | None:
        return self._failure

    @property
    def active(self) -> bool:
        """Whether some hooks are entered (and so have to be exited)."""
        return bool(self._entered)

    def mark_stale(self) -> bool:
        """The membership the hooks were entered with changed; False (nothing to do) when they
        were never entered, or there are none."""
        # Without the lock: called on the worker's event loop, which must not wait for hooks being
        # entered (a rendezvous with the other nodes); they read the cluster before this is set.
        if not self._started or not self._plugins:
            return False
        self.stale = True
        return True

    @property
    def busy(self) -> bool:
        """Whether a task is inside the hooks (entered them and has not left)."""
        return self._users > 0

    def enter_nested(self) -> Outcome | None:
        """:meth:`enter` for a subtask: while tasks are inside stale hooks (its parent among them,
        which waits for it), it joins them as they are rather than waiting."""
        with self._lock:
            if self.stale and self._users > 0:
                if self._failure is None:
                    self._users += 1
                return self._failure
        return self.enter()

    def enter(self) -> Outcome | None:
        """Enter the hooks if not done yet (or again, when stale); the failure outcome if they
        failed (now or before). Unless it returns a failure, the caller is inside them until
        :meth:`leave`."""
        with self._lock:
            if self.stale:
                # Never under a running task: the hooks are left once every task inside is out.
                while self._users > 0:
                    self._idle.wait()
                if self.stale:
                    with deferred_interrupts.held():
                        self._exit_all(self._log)
                    self.stale = False
                    self._failure = None
                    self.done = False
            if not self.done:
                self._started = True
                # A task stopped while its thread enters the hooks (thread executor) stops once they
                # are in: cut off half-way, a hook would be kept as the plugin's failure for every later task.
                with deferred_interrupts.held():
                    try:
                        self._failure = self._enter_all()
                    finally:
                        self.done = True
            if self._failure is None:
                self._users += 1
            return self._failure

    def leave(self) -> None:
        """A task that :meth:`enter` let through is done."""
        with self._lock:
            self._users = max(0, self._users - 1)
            if self._users == 0:
                self._idle.notify_all()

    def _enter_all(self) -> Outcome | None:
        info = self._info()
        for plugin in self._plugins:
            hook = plugin.hook(self.hook)
            assert hook is not None
            try:
                manager = hook(info, plugin.config)
                if manager is not None:
                    enter = getattr(manager, "__enter__", None)
                    if not callable(enter) or not callable(getattr(manager, "__exit__", None)):
                        raise TypeError(
                            f"{self.hook} returned {type(manager).__name__}, not a context manager or None"
                        )
                    enter()
                    self._entered.append((plugin, manager))
            except BaseException as error:
                failure = PluginError(plugin.name, self.hook, error).outcome()
                self._exit_all(lambda text: None)
                return failure
        return None

    def exit(self, log: Callable[[str], None]) -> None:
        """Exit the entered hooks in reverse order; errors are logged, not raised."""
        with self._lock:
            self._exit_all(log)

    def _exit_all(self, log: Callable[[str], None]) -> None:
        while self._entered:
            plugin, manager = self._entered.pop()
            try:
                manager.__exit__(None, None, None)
            except BaseException as error:
                log(f'plugin "{plugin.name}" {self.hook} exit failed: {exception_type_name(error)}: {error}')
