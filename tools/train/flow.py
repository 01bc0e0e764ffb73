"""Rectified flow: the training objective, the fixed-grid validation loss and the Euler sampler.

x_t = (1 - t) x0 + t eps, so t = 1 is pure noise (docs/model-format.md); the network predicts the
velocity v = eps - x0, and sampling integrates dx/dt = v from t = 1 down to 0.
"""
import torch

from dataset import to_model_range

LABEL_DROPOUT = 0.1      # classifier-free guidance: how often training sees the null class
VAL_TIMES = [(k + 0.5) / 8 for k in range(8)]
VAL_SEED = 1234


def sample_t(batch_size, device, generator):
    """Logit-normal(0, 1) flow times (Esser et al. 2024, SD3): the velocity is nearly unpredictable
    noise near t = 0 and a data mean near t = 1; the middle, where the image is decided, is where a
    small model's capacity pays, and it is also where few-step sampling spends its steps."""
    return torch.sigmoid(torch.randn(batch_size, device=device, generator=generator))


def noisy_input(x0, t, eps):
    """x_t and the velocity target for (B, C, H, W) data x0, noise eps and (B,) times t."""
    tb = t[:, None, None, None]
    return (1 - tb) * x0 + tb * eps, eps - x0


def training_inputs(data, batch_size, generator):
    """One training batch: x_t, t, labels with dropout to the null class, and the velocity target."""
    x0, labels = data.train_batch(batch_size, generator)
    device = x0.device
    t = sample_t(batch_size, device, generator)
    eps = torch.randn(x0.shape, device=device, generator=generator)
    eps = eps.contiguous(memory_format=torch.channels_last)
    drop = torch.rand(batch_size, device=device, generator=generator) < LABEL_DROPOUT
    labels = torch.where(drop, torch.full_like(labels, data.null_class), labels)
    x_t, target = noisy_input(x0, t, eps)
    return x_t, t, labels, target


@torch.no_grad()
def validation_loss(model, data, batch_size=256):
    """Mean squared velocity error on the held-out images, class-conditioned, at every t of VAL_TIMES
    with noise from a fixed CPU seed: comparable across chunks and machines. Returns (mean, per-t list)."""
    generator = torch.Generator().manual_seed(VAL_SEED)
    per_t = []
    for t_value in VAL_TIMES:
        total, count = 0.0, 0
        for start in range(0, len(data.val_images), batch_size):
            x0 = to_model_range(data.val_images[start:start + batch_size])
            labels = data.val_labels[start:start + batch_size]
            eps = torch.randn(x0.shape, generator=generator).to(x0.device)
            t = torch.full((len(x0),), t_value, device=x0.device)
            x_t, target = noisy_input(x0, t, eps)
            with autocast(x0.device):
                v = model(x_t.contiguous(memory_format=torch.channels_last), t, labels)
            total += torch.sum((v.float() - target) ** 2).item()
            count += target.numel()
        per_t.append(total / count)
    return sum(per_t) / len(per_t), per_t


@torch.no_grad()
def sample(model, labels, null_class, steps, guidance, generator):
    """Euler integration from t = 1 to 0 on a uniform grid with classifier-free guidance:
    v = v_null + guidance (v_class - v_null). Returns (B, C, size, size) in about [-1, 1]."""
    size = model.cfg["sample_size"]
    batch = len(labels)
    x = torch.randn(batch, model.cfg["in_channels"], size, size, generator=generator).to(labels.device)
    both_labels = torch.cat([labels, torch.full_like(labels, null_class)])
    for k in range(steps):
        t, t_next = 1 - k / steps, 1 - (k + 1) / steps
        with autocast(x.device):
            v = model(torch.cat([x, x]), torch.full((2 * batch,), t, device=x.device), both_labels).float()
        v_class, v_null = v.chunk(2)
        x = x - (t - t_next) * (v_null + guidance * (v_class - v_null))
    return x


def autocast(device):
    """bf16 autocast on CUDA (fp32 master weights); CPU runs stay fp32."""
    return torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=device.type == "cuda")
