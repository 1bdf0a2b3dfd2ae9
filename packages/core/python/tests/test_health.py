"""The health checker's runner: what counts as healthy, and how the user's function is called."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from prerequisites import require_module  # noqa: E402
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
        "def numpy_all(info):\n    import numpy\n    return (numpy.array([60.0, 70.0]) < 85).all()\n"
        "def numpy_false(info):\n    import numpy\n    return numpy.bool_(False)\n"
        "def tensor_all(info):\n    import torch\n    return (torch.tensor([60.0, 70.0]) < 85).all()\n"
        "def tensor_false(info):\n    import torch\n    return torch.tensor(False)\n"
        "def tensor_many(info):\n    import torch\n    return torch.tensor([True, True])\n"
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


def test_a_numpy_or_torch_true_is_healthy(checks: None) -> None:
    # Before: a check written with numpy or torch (``(temps < 85).all()``) answered a numpy bool or a
    # 0-d tensor, counted as a failure: every healthy node was replaced after `failures` checks, and
    # its replacement too, for as long as the pool lived.
    require_module("numpy", "numpy for the health checker tests (scripts/toolchain.sh installs it)")
    assert run_check("checks_module:numpy_all") is True
    assert run_check("checks_module:numpy_false") == "checks_module:numpy_false returned False"
    require_module("torch", "torch for the health checker tests (scripts/toolchain.sh installs Debian's python3-torch)")
    assert run_check("checks_module:tensor_all") is True
    assert run_check("checks_module:tensor_false") == "checks_module:tensor_false returned False"
    assert "expected True or a reason" in run_check("checks_module:tensor_many")
