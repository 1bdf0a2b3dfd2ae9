"""Applying the ``cluster`` message (see docs/protocol.md, "Cluster"): its environment, the
instance info tasks see, the accelerator check, and the plugins (their ``decorate`` hooks on every
task, their ``around_app`` hooks entered once per worker).

With the process executor, ``around_app`` is entered here, in a thread of the worker, before any
child's first task (:meth:`ClusterSetup.app_gate`); its environment changes then reach the children.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Dict, List, NamedTuple

from .context import runtime, set_cluster
from .execution import Outcome, TaskRunner
from .info import InstanceInfo, instance_info_from_cluster
from .plugins import Lifecycle, PluginLoadError, decorators, load_plugins
from .protocol import Message
from .secrets import SecretMask, secrets_of


class ClusterCheck(NamedTuple):
    """A ``cluster`` message read, before anything of it is applied."""

    #: its environment variables (values as strings; null values left out), its secrets included
    env: Dict[str, str]
    info: InstanceInfo
    #: why it cannot be applied (the ``reject`` reason), or None
    problem: str | None


class ClusterSetup:
    """The cluster settings the worker runs with, and the plugins they name."""

    def __init__(self, log: Callable[[str], None], post: Callable[..., None],
                 apply_env: Callable[[Dict[str, str | None]], None]) -> None:
        self._log = log
        self._post = post
        self._apply_env = apply_env
        #: the plugins' around_app hooks: entered by the first task (thread executor) or, with the
        #: process executor, in a thread of the worker before the first task goes to a child
        self.app = Lifecycle("around_app", lambda: runtime.cluster, log)
        self.runner = TaskRunner(prepare=self.app.enter, finish=self.app.leave)
        #: the nested-task executor's: a subtask joins hooks gone stale while its parent task is
        #: inside them (waiting for the parent to leave would never end)
        self.nested_runner = TaskRunner(prepare=self.app.enter_nested, finish=self.app.leave)
        #: the values of the secrets the clusters brought, masked in tasks' output and errors
        self.secret_mask = SecretMask()
        #: the last cluster message applied, without its env and secrets (told in ``welcome``)
        self.message: Dict[str, Any] | None = None
        self._plugin_identity: List[Any] = []
        #: the pool's membership the last cluster message told (see :func:`membership_of`)
        self._membership: Any = None
        self._app_waiters: List[Callable[[], None]] = []
        self._app_entering = False

    @staticmethod
    def check(message: Message) -> ClusterCheck:
        """Reads ``message``; with ``check_accelerators`` or ``pin_accelerators``, checks the devices."""
        env = message.get("env") or {}
        if not isinstance(env, dict):
            env = {}
        env = {str(key): str(value) for key, value in env.items() if value is not None}
        # Secrets are environment variables held in memory only: never kept in ``self.message``.
        env.update(secrets_of(message))
        info = instance_info_from_cluster(message)
        problem = None
        if message.get("check_accelerators") is True or message.get("pin_accelerators") is True:
            from .devices import check_accelerators

            problem = check_accelerators(info.workers_per_node, {**os.environ, **env})
        return ClusterCheck(env, info, problem)

    def apply(self, message: Message, checked: ClusterCheck) -> str | None:
        """Applies a checked ``message`` to this process; why its plugins cannot load, or None."""
        os.environ.update(checked.env)
        self.secret_mask.add(secrets_of(message))
        set_cluster(checked.info)
        try:
            plugins = load_plugins(message.get("plugins"))
        except PluginLoadError as error:
            return str(error)
        identity = [plugin.identity for plugin in plugins]
        if identity != self._plugin_identity:  # a cluster sent again with the same plugins changes nothing
            if not self.app.set_plugins(plugins):
                self._log("the plugins changed after their around_app hooks were entered; keeping the first ones")
            self.runner.set_decorators(decorators(plugins))
            self.nested_runner.set_decorators(decorators(plugins))
            self._plugin_identity = identity
        membership = membership_of(message)
        if self._membership is not None and membership != self._membership and self.app.mark_stale():
            self._log("the pool's membership changed: the plugins' around_app hooks are entered again "
                      "by the next task, once no task is inside them")
        self._membership = membership
        self.message = {key: value for key, value in message.items() if key not in ("env", "secrets")}
        return None

    # -- around_app for the process executor ------------------------------------------------------

    def app_gate(self, retry: Callable[[], None], busy: bool = False, nested: bool = False) -> Outcome | bool:
        """True once the ``around_app`` hooks are entered, the failure outcome if they failed, or
        False while they are being entered (``retry`` is called when that is over). Stale hooks
        (the membership changed) are entered again once no child runs a task (``busy``): until
        then False, and the caller asks again when a task ends — but a subtask (``nested``) runs
        under them as they are, since its parent, inside them, may wait for it."""
        app = self.app
        if app.done and not app.stale and not self._app_entering:  # (entering is over once its env changes reached the children)
            return app.failure or True
        if app.stale and busy and not self._app_entering:
            return (app.failure or True) if nested else False
        if retry not in self._app_waiters:
            self._app_waiters.append(retry)
        if not self._app_entering:
            self._app_entering = True
            threading.Thread(target=self._enter_app, name="skyward-around-app", daemon=True).start()
        return False

    def _enter_app(self) -> None:
        before = dict(os.environ)
        if self.app.enter() is None:
            self.app.leave()  # the children run the tasks: none is inside the hooks in this thread
        after = dict(os.environ)
        changes: Dict[str, str | None] = {key: value for key, value in after.items() if before.get(key) != value}
        changes.update({key: None for key in before if key not in after})
        self._post(self._app_entered, changes)

    def _app_entered(self, changes: Dict[str, str | None]) -> None:
        self._app_entering = False
        if changes:
            self._apply_env(changes)
        waiters, self._app_waiters = self._app_waiters, []
        for retry in waiters:
            retry()


def membership_of(message: Message) -> Any:
    """What a ``cluster`` message says of the pool's membership: the node count, the head's address
    and every peer (its addresses and instance). A framework's process group formed with one is stale
    under another."""
    peers = message.get("peers")
    return (
        message.get("total_nodes"),
        message.get("head_addr"),
        message.get("head_port"),
        [
            (peer.get("node"), peer.get("private_ip"), peer.get("public_ip"), peer.get("instance_id"))
            for peer in (peers if type(peers) is list else [])
            if type(peer) is dict
        ],
    )
