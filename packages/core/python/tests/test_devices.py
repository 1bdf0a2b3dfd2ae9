"""One worker per accelerator: which device each worker process is pinned to, and the node check."""

from __future__ import annotations

import os
import stat

import pytest

from skyward.devices import check_accelerators, device_for, nvidia_devices, pin_accelerator


def test_device_for_is_the_local_index_or_that_entry_of_cuda_visible_devices() -> None:
    assert [device_for(local, None) for local in range(3)] == ["0", "1", "2"]
    assert device_for(1, "") == "1"
    assert [device_for(local, "2, 3") for local in range(2)] == ["2", "3"]
    assert device_for(0, "MIG-aaaa,MIG-bbbb") == "MIG-aaaa"
    with pytest.raises(RuntimeError, match=r"worker 2 has no accelerator: CUDA_VISIBLE_DEVICES='2,3' names 2 devices"):
        device_for(2, "2,3")


def test_pin_accelerator_narrows_cuda_visible_devices_to_one_device() -> None:
    environ: dict[str, str] = {}
    assert pin_accelerator(1, environ) == "1"
    assert environ == {"CUDA_VISIBLE_DEVICES": "1"}
    environ = {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert pin_accelerator(3, environ) == "7"
    assert environ["CUDA_VISIBLE_DEVICES"] == "7"


def _fake_nvidia_smi(tmp_path, monkeypatch, gpus: int) -> None:
    script = tmp_path / "nvidia-smi"
    lines = "\\n".join(f"GPU {index}: NVIDIA H100 80GB HBM3 (UUID: GPU-{index})" for index in range(gpus))
    script.write_text(f'#!/bin/sh\n[ "$1" = "-L" ] || exit 2\nprintf "{lines}\\n"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")


def test_check_accelerators_counts_the_gpus_nvidia_smi_lists(tmp_path, monkeypatch) -> None:
    _fake_nvidia_smi(tmp_path, monkeypatch, 2)
    assert nvidia_devices() == ["0", "1"]
    assert check_accelerators(2, {}) is None
    assert check_accelerators(4, {}) == (
        "the pool runs 4 workers per node, one per accelerator, but this node has fewer: nvidia-smi -L lists 2"
    )


def test_check_accelerators_trusts_cuda_visible_devices_and_a_node_without_nvidia_smi(tmp_path, monkeypatch) -> None:
    assert check_accelerators(2, {"CUDA_VISIBLE_DEVICES": "0,1"}) is None
    assert "CUDA_VISIBLE_DEVICES='3' names 1" in (check_accelerators(2, {"CUDA_VISIBLE_DEVICES": "3"}) or "")
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvidia-smi here
    assert nvidia_devices() is None
    assert check_accelerators(8, {}) is None
