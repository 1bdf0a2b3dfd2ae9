"""The health checker's runner: what counts as healthy, and how the user's function is called."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from skyward.context import runtime, set_cluster  # noqa: E402
from skyward.health import run_check  # noqa: E402
from skyward.info import instance_info_from_cluster  # noqa: E402


@pytest.fixture()
def checks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    (tmp_path / "checks_module.py").write_text(
        "def ok(info):\n    return info.node == 3\n"
        "def no_argument():\n    return True\n"
        "def reason(info):\n    return 'disk full'\n"
        "def false(info):\n    return False\n"
        "def number(info):\n    return 1\n"
        "def empty(info):\n    return ''\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    previous = runtime.cluster
    set_cluster(instance_info_from_cluster({
        "node": 3, "total_nodes": 4, "workers_per_node": 1, "head_addr": "10.0.0.1", "head_port": 29500,
        "job_id": "j", "peers": [], "accelerators": 0, "accelerator": None, "network": None,
    }))
    yield
    set_cluster(previous)
    sys.modules.pop("checks_module", None)


def test_true_is_healthy_and_the_function_gets_instance_info(checks: None) -> None:
    assert run_check("checks_module:ok") is True
    assert run_check("checks_module:no_argument") is True


def test_anything_else_is_a_reason(checks: None) -> None:
    assert run_check("checks_module:reason") == "disk full"
    assert run_check("checks_module:false") == "checks_module:false returned False"
    assert run_check("checks_module:number") == "checks_module:number returned int 1 (expected True or a reason)"
    assert "returned str ''" in run_check("checks_module:empty")
