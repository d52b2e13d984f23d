"""The half-precision tests' tolerance, derived from an f32 reference."""

from __future__ import annotations

import torch


def within_dtype_error(ours: torch.Tensor, eager: torch.Tensor, reference: torch.Tensor, ulps: float = 2.0) -> bool:
    """Whether `ours` (bf16/fp16) is as close to the f32 `reference` as
    eager torch in the same dtype is: elementwise, at most twice eager's
    largest error plus `ulps` units in the last place of the dtype at each
    element's magnitude. (A missing bias or a wrong index moves outputs by
    far more: test_tolerance_catches_bugs.)"""
    eps = torch.finfo(ours.dtype).eps
    reference = reference.float()
    eager_error = (eager.float() - reference).abs().max()
    bound = 2 * eager_error + ulps * eps * reference.abs()
    return bool(((ours.float() - reference).abs() <= bound).all())
