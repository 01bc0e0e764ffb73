"""Exponential moving average of a model's weights and BatchNorm running statistics."""
import copy

import torch

DECAY = 0.999


class EMA:
    """ema = d ema + (1 - d) model after every step, d = min(DECAY, (1 + step) / (10 + step)): the
    ramp keeps the first steps' random init from lingering (about 1000 steps at full decay).
    BatchNorm running statistics are averaged like weights: a fair approximation between the exact
    recalibrations (bn_calibration.py) at the end of each chunk and at export."""

    def __init__(self, model):
        """model must already sit on its device: state_dict() tensors share the parameters' storage,
        and update() keeps these references."""
        self.model = copy.deepcopy(model).eval().requires_grad_(False)
        source, mine = model.state_dict(), self.model.state_dict()
        names = [name for name, value in source.items() if value.is_floating_point()]
        self.averaged = [mine[name] for name in names]
        self.source = [source[name] for name in names]

    @torch.no_grad()
    def update(self, step):
        decay = min(DECAY, (1 + step) / (10 + step))
        # Two fused multi-tensor launches instead of one kernel per tensor.
        torch._foreach_mul_(self.averaged, decay)
        torch._foreach_add_(self.averaged, self.source, alpha=1 - decay)
