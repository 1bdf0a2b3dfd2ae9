"""The cuML worker module, against a fake ``cuml`` package whose ``accel.install()`` records calls."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Dict, List

import pytest
from conftest import CORE_PYTHON, PLUGIN_PYTHON

FAKE_ACCEL = textwrap.dedent(
    """
    import os

    def install():
        with open(os.environ["FAKE_CUML_RECORD"], "a") as record:
            record.write(f"install {os.getpid()}\\n")
    """
)


@pytest.fixture
def fake_cuml(tmp_path: Path) -> Dict[str, str]:
    """A stand-in ``cuml`` package on PYTHONPATH, and where its ``accel.install()`` records calls."""
    package = tmp_path / "site" / "cuml"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "accel.py").write_text(FAKE_ACCEL)
    return {
        "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), str(PLUGIN_PYTHON), str(CORE_PYTHON)]),
        "FAKE_CUML_RECORD": str(tmp_path / "calls.txt"),
    }


def run_python(code: str, env: Dict[str, str]) -> subprocess.CompletedProcess:
    """Runs ``code`` in a fresh interpreter: a worker process, or one executor subprocess."""
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=60,
    )


def recorded(env: Dict[str, str]) -> List[str]:
    path = Path(env["FAKE_CUML_RECORD"])
    return path.read_text().splitlines() if path.exists() else []


def test_around_app_installs_the_accelerator_once_per_process(fake_cuml: Dict[str, str]) -> None:
    result = run_python(
        """
        import os
        from skyward import InstanceInfo
        import skyward_plugin_cuml as plugin
        info = InstanceInfo(node=0)
        assert plugin.around_app(info, {"cuda": "cu12"}) is None
        assert plugin.around_app(info, {"cuda": "cu12"}) is None
        assert plugin.around_process(info, {"cuda": "cu12"}) is None
        print(os.getpid())
        """,
        fake_cuml,
    )
    assert result.returncode == 0, result.stderr
    assert recorded(fake_cuml) == [f"install {result.stdout.strip()}"]


def test_every_executor_subprocess_installs_its_own(fake_cuml: Dict[str, str]) -> None:
    code = """
        import os
        from skyward import InstanceInfo
        import skyward_plugin_cuml as plugin
        plugin.around_process(InstanceInfo(node=0, worker=int(os.environ["SLOT"])), {})
        print(os.getpid())
        """
    pids = []
    for slot in ("0", "1"):
        result = run_python(code, {**fake_cuml, "SLOT": slot})
        assert result.returncode == 0, result.stderr
        pids.append(result.stdout.strip())
    assert pids[0] != pids[1]
    assert recorded(fake_cuml) == [f"install {pid}" for pid in pids]


def test_concurrent_first_tasks_install_once(fake_cuml: Dict[str, str]) -> None:
    result = run_python(
        """
        import threading
        from skyward import InstanceInfo
        import skyward_plugin_cuml as plugin
        threads = [threading.Thread(target=plugin.around_app, args=(InstanceInfo(node=0), {})) for _ in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        """,
        fake_cuml,
    )
    assert result.returncode == 0, result.stderr
    assert len(recorded(fake_cuml)) == 1


def test_a_worker_without_cuml_fails_with_a_clear_error(tmp_path: Path) -> None:
    result = run_python(
        """
        from skyward import InstanceInfo
        import skyward_plugin_cuml as plugin
        try:
            plugin.around_app(InstanceInfo(node=0), {})
        except RuntimeError as error:
            print(error)
        """,
        {"PYTHONPATH": os.pathsep.join([str(PLUGIN_PYTHON), str(CORE_PYTHON)])},
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("cannot import cuml.accel (No module named 'cuml')")
    assert "https://pypi.nvidia.com" in result.stdout


def test_the_worker_runtime_enters_it_before_the_first_task(fake_cuml: Dict[str, str]) -> None:
    """Through the runtime's own plugin loading and lifecycle, as the ``cluster`` message names it."""
    result = run_python(
        """
        from skyward import InstanceInfo
        from skyward.plugins import Lifecycle, load_plugins
        plugins = load_plugins([{"name": "cuml", "module": "skyward_plugin_cuml", "config": {"cuda": "cu12"}}])
        lifecycle = Lifecycle("around_app", lambda: InstanceInfo(node=0))
        assert lifecycle.set_plugins(plugins)
        assert lifecycle.enter() is None
        assert lifecycle.enter() is None
        lifecycle.exit(print)
        """,
        fake_cuml,
    )
    if "No module named 'skyward.plugins'" in result.stderr:
        pytest.skip("this @skyward/core's Python runtime has no plugin hooks yet")
    assert result.returncode == 0, result.stderr
    assert len(recorded(fake_cuml)) == 1


def test_the_runtime_fails_tasks_naming_the_plugin_when_cuml_is_missing(tmp_path: Path) -> None:
    result = run_python(
        """
        from skyward import InstanceInfo
        from skyward.plugins import Lifecycle, load_plugins
        plugins = load_plugins([{"name": "cuml", "module": "skyward_plugin_cuml", "config": {}}])
        lifecycle = Lifecycle("around_app", lambda: InstanceInfo(node=0))
        lifecycle.set_plugins(plugins)
        failure = lifecycle.enter()
        print(failure[3])
        """,
        {"PYTHONPATH": os.pathsep.join([str(PLUGIN_PYTHON), str(CORE_PYTHON)])},
    )
    if "No module named 'skyward.plugins'" in result.stderr:
        pytest.skip("this @skyward/core's Python runtime has no plugin hooks yet")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith('plugin "cuml" around_app failed: RuntimeError: cannot import cuml.accel')
