"""Device and precision selection (rankkit/devices.py)."""

from __future__ import annotations

import pytest
import torch

from rankkit.devices import PRECISIONS, autocast, check_precision, pick_device
from rankkit.errors import RankkitError

CPU = torch.device("cpu")


def test_bf16_autocast_runs_matmuls_in_bf16_and_keeps_fp32_weights() -> None:
    layer = torch.nn.Linear(4, 4)
    with autocast("bf16", CPU):
        out = layer(torch.randn(2, 4))
    assert out.dtype == torch.bfloat16
    assert layer.weight.dtype == torch.float32


def test_fp32_is_a_no_op() -> None:
    with autocast("fp32", CPU):
        assert torch.nn.Linear(4, 4)(torch.randn(2, 4)).dtype == torch.float32


def test_fp16_on_cpu_is_refused_with_the_reason() -> None:
    with pytest.raises(RankkitError, match="fp16 needs a CUDA device"):
        check_precision("fp16", CPU)


def test_unknown_precision_and_device_are_refused() -> None:
    assert PRECISIONS == ("fp32", "bf16", "fp16")
    with pytest.raises(RankkitError, match="unknown precision 'fp8'"):
        check_precision("fp8", CPU)
    with pytest.raises(RankkitError, match="unknown device"):
        pick_device("tpu")
