"""The PyTorch definition of rtvd's U-Net (docs/model-format.md), the reference the C++ engine is tested
against. It mirrors diffusers' UNet2DConditionModel layout and parameter names without depending on it:
module attribute names are chosen so that state_dict() keys are the names in the doc.

Runs on PyTorch 1.13 and 2.x; NCHW inside (the engine is NHWC: callers permute). Clarity over speed.
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

BATCH_NORM_EPS = 1e-5       # fixed by the format, not in config.json
TRANSFORMER_GROUP_EPS = 1e-6  # Transformer2DModel's input GroupNorm
LAYER_NORM_EPS = 1e-5
MAX_PERIOD = 10000.0


def timestep_embedding(t, dim, flip_sin_to_cos, freq_shift):
    """diffusers get_timestep_embedding: (B,) timesteps -> (B, dim) sinusoids."""
    half = dim // 2
    exponent = -math.log(MAX_PERIOD) * torch.arange(half, dtype=t.dtype, device=t.device) / (half - freq_shift)
    angles = t[:, None] * torch.exp(exponent)[None, :]                    # (B, half)
    sin, cos = torch.sin(angles), torch.cos(angles)
    emb = torch.cat([cos, sin] if flip_sin_to_cos else [sin, cos], dim=-1)  # (B, 2 half)
    if dim % 2:
        emb = F.pad(emb, (0, 1))
    return emb


def heads_for(cfg, channels):
    """A fixed head count (num_attention_heads), else channels / attention_head_dim."""
    if cfg.get("num_attention_heads", 0) > 0:
        return cfg["num_attention_heads"]
    return channels // cfg["attention_head_dim"]


class TimestepEmbedding(nn.Module):
    """linear_2(silu(linear_1(sinusoids))): (B, C_0) -> (B, T)."""

    def __init__(self, in_dim, time_dim):
        super().__init__()
        self.linear_1 = nn.Linear(in_dim, time_dim)
        self.linear_2 = nn.Linear(time_dim, time_dim)

    def forward(self, x):
        return self.linear_2(F.silu(self.linear_1(x)))


class ResnetBatch(nn.Module):
    """conv-BN-SiLU ResNet with FiLM from the time embedding; BN folds into the convs at load.
    g, b = time_emb_proj(silu(emb)).chunk(2)
    h = silu(norm1(conv1(x)) * (1 + g) + b); out = silu(norm2(conv2(h))) + shortcut(x)
    """

    def __init__(self, in_ch, out_ch, time_dim):
        super().__init__()
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1, bias=False)
        self.norm1 = nn.BatchNorm2d(out_ch, eps=BATCH_NORM_EPS)
        self.time_emb_proj = nn.Linear(time_dim, 2 * out_ch)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1, bias=False)
        self.norm2 = nn.BatchNorm2d(out_ch, eps=BATCH_NORM_EPS)
        self.conv_shortcut = nn.Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else None

    def forward(self, x, emb):                                    # x (B, in, H, W), emb (B, T)
        g, b = self.time_emb_proj(F.silu(emb)).chunk(2, dim=1)    # (B, out) each
        h = self.norm1(self.conv1(x))                             # (B, out, H, W)
        h = F.silu(h * (1 + g[:, :, None, None]) + b[:, :, None, None])
        h = F.silu(self.norm2(self.conv2(h)))                     # (B, out, H, W)
        shortcut = self.conv_shortcut(x) if self.conv_shortcut is not None else x
        return h + shortcut


class ResnetGroup(nn.Module):
    """diffusers ResnetBlock2D: GroupNorm+SiLU pre-activation, time embedding added after conv1.
    h = conv1(silu(norm1(x))) + time_emb_proj(silu(emb)); out = shortcut(x) + conv2(silu(norm2(h)))
    """

    def __init__(self, in_ch, out_ch, time_dim, groups, eps):
        super().__init__()
        self.norm1 = nn.GroupNorm(groups, in_ch, eps=eps)
        self.conv1 = nn.Conv2d(in_ch, out_ch, 3, padding=1)
        self.time_emb_proj = nn.Linear(time_dim, out_ch)
        self.norm2 = nn.GroupNorm(groups, out_ch, eps=eps)
        self.conv2 = nn.Conv2d(out_ch, out_ch, 3, padding=1)
        self.conv_shortcut = nn.Conv2d(in_ch, out_ch, 1) if in_ch != out_ch else None

    def forward(self, x, emb):                                    # x (B, in, H, W), emb (B, T)
        h = self.conv1(F.silu(self.norm1(x)))                     # (B, out, H, W)
        h = h + self.time_emb_proj(F.silu(emb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        shortcut = self.conv_shortcut(x) if self.conv_shortcut is not None else x
        return shortcut + h


def make_resnet(cfg, in_ch, out_ch, time_dim):
    if cfg["norm"] == "batch":
        return ResnetBatch(in_ch, out_ch, time_dim)
    return ResnetGroup(in_ch, out_ch, time_dim, cfg["norm_num_groups"], cfg.get("norm_eps", 1e-5))


class Attention(nn.Module):
    """Multi-head softmax(q k^T / sqrt(head dim)) v; self-attention when context is None."""

    def __init__(self, dim, context_dim, heads):
        super().__init__()
        self.heads = heads
        self.sdpa = False  # F.scaled_dot_product_attention (PyTorch 2) instead: see UNet.use_sdpa
        self.to_q = nn.Linear(dim, dim, bias=False)
        self.to_k = nn.Linear(context_dim, dim, bias=False)
        self.to_v = nn.Linear(context_dim, dim, bias=False)
        self.to_out = nn.ModuleList([nn.Linear(dim, dim)])  # a list so the key reads to_out.0, as in diffusers

    def split_heads(self, x):                                    # (B, N, C) -> (B, heads, N, C / heads)
        b, n, c = x.shape
        return x.reshape(b, n, self.heads, c // self.heads).transpose(1, 2)

    def forward(self, x, context=None):                          # x (B, N, C), context (B, L, D)
        source = x if context is None else context
        q = self.split_heads(self.to_q(x))                       # (B, h, N, d)
        k = self.split_heads(self.to_k(source))                  # (B, h, L, d)
        v = self.split_heads(self.to_v(source))                  # (B, h, L, d)
        if self.sdpa:
            out = F.scaled_dot_product_attention(q, k, v)        # (B, h, N, d)
        else:
            scores = q @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])  # (B, h, N, L)
            out = scores.softmax(dim=-1) @ v                     # (B, h, N, d)
        out = out.transpose(1, 2).reshape(x.shape)               # (B, N, C)
        return self.to_out[0](out)


class GEGLU(nn.Module):
    """proj to 2 * dim_out, halves (h, gate): h * gelu(gate) (exact erf GELU)."""

    def __init__(self, dim_in, dim_out):
        super().__init__()
        self.proj = nn.Linear(dim_in, 2 * dim_out)

    def forward(self, x):                                        # (B, N, dim_in) -> (B, N, dim_out)
        h, gate = self.proj(x).chunk(2, dim=-1)
        return h * F.gelu(gate)


class FeedForward(nn.Module):
    """GEGLU C -> 4C, then Linear 4C -> C. Slot 1 is diffusers' dropout (identity at inference), kept so
    the output projection's key reads ff.net.2."""

    def __init__(self, dim):
        super().__init__()
        self.net = nn.Sequential(GEGLU(dim, 4 * dim), nn.Identity(), nn.Linear(4 * dim, dim))

    def forward(self, x):
        return self.net(x)


class BasicTransformerBlock(nn.Module):
    """h += attn1(norm1(h)); h += attn2(norm2(h), ctx) (with cross-attention); h += ff(norm3(h))."""

    def __init__(self, dim, heads, context_dim):
        super().__init__()
        self.norm1 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.attn1 = Attention(dim, dim, heads)
        if context_dim > 0:
            self.norm2 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
            self.attn2 = Attention(dim, context_dim, heads)
        else:
            self.norm2 = self.attn2 = None
        self.norm3 = nn.LayerNorm(dim, eps=LAYER_NORM_EPS)
        self.ff = FeedForward(dim)

    def forward(self, h, context):                               # h (B, N, C), context (B, L, D) or None
        h = h + self.attn1(self.norm1(h))
        if self.attn2 is not None:
            h = h + self.attn2(self.norm2(h), context)
        return h + self.ff(self.norm3(h))


class Transformer2D(nn.Module):
    """diffusers Transformer2DModel: GroupNorm, proj_in, blocks over the H*W tokens, proj_out, residual.
    Projections are Linear on tokens or 1x1 convs on the image: the same map, different weight shapes."""

    def __init__(self, dim, heads, layers, groups, context_dim, linear_projection):
        super().__init__()
        self.linear_projection = linear_projection
        self.norm = nn.GroupNorm(groups, dim, eps=TRANSFORMER_GROUP_EPS)
        self.proj_in = nn.Linear(dim, dim) if linear_projection else nn.Conv2d(dim, dim, 1)
        self.transformer_blocks = nn.ModuleList(
            [BasicTransformerBlock(dim, heads, context_dim) for _ in range(layers)])
        self.proj_out = nn.Linear(dim, dim) if linear_projection else nn.Conv2d(dim, dim, 1)

    def forward(self, x, context):                               # x (B, C, H, W)
        b, c, height, width = x.shape
        h = self.norm(x)
        if not self.linear_projection:
            h = self.proj_in(h)
        h = h.permute(0, 2, 3, 1).reshape(b, height * width, c)  # (B, HW, C) tokens
        if self.linear_projection:
            h = self.proj_in(h)
        for block in self.transformer_blocks:
            h = block(h, context)
        if self.linear_projection:
            h = self.proj_out(h)
        h = h.reshape(b, height, width, c).permute(0, 3, 1, 2)   # (B, C, H, W)
        if not self.linear_projection:
            h = self.proj_out(h)
        return h + x


def make_transformer(cfg, channels):
    return Transformer2D(channels, heads_for(cfg, channels), cfg.get("transformer_layers_per_block", 1),
                         cfg["norm_num_groups"], cfg.get("cross_attention_dim", 0),
                         cfg.get("use_linear_projection", True))


class Downsample(nn.Module):
    """3x3 conv, stride 2, pad 1: (B, C, H, W) -> (B, C, H/2, W/2)."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, stride=2, padding=1)

    def forward(self, x):
        return self.conv(x)


class Upsample(nn.Module):
    """Nearest 2x, then 3x3 conv: (B, C, H, W) -> (B, C, 2H, 2W)."""

    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1)

    def forward(self, x):
        return self.conv(F.interpolate(x, scale_factor=2.0, mode="nearest"))


class DownBlock(nn.Module):
    """ResNets (each followed by a transformer when attention), then an optional downsampler.
    Returns the result and every intermediate output, which become skip connections."""

    def __init__(self, cfg, in_ch, out_ch, time_dim, attention, downsample):
        super().__init__()
        n = cfg["layers_per_block"]
        self.resnets = nn.ModuleList(
            [make_resnet(cfg, in_ch if j == 0 else out_ch, out_ch, time_dim) for j in range(n)])
        self.attentions = nn.ModuleList([make_transformer(cfg, out_ch) for _ in range(n)]) if attention else None
        self.downsamplers = nn.ModuleList([Downsample(out_ch)]) if downsample else None

    def forward(self, h, emb, context):
        skips = []
        for j, resnet in enumerate(self.resnets):
            h = resnet(h, emb)
            if self.attentions is not None:
                h = self.attentions[j](h, context)
            skips.append(h)
        if self.downsamplers is not None:
            h = self.downsamplers[0](h)
            skips.append(h)
        return h, skips


class MidBlock(nn.Module):
    """ResNet, optional transformer, ResNet, all at the deepest level's channels."""

    def __init__(self, cfg, channels, time_dim):
        super().__init__()
        self.resnets = nn.ModuleList([make_resnet(cfg, channels, channels, time_dim) for _ in range(2)])
        self.attentions = nn.ModuleList([make_transformer(cfg, channels)]) if cfg["mid_attention"] else None

    def forward(self, h, emb, context):
        h = self.resnets[0](h, emb)
        if self.attentions is not None:
            h = self.attentions[0](h, context)
        return self.resnets[1](h, emb)


class UpBlock(nn.Module):
    """layers_per_block + 1 ResNets, each on cat(h, newest skip) (+ transformer), then an optional
    upsampler. skip_channels lists the channels of the skips in the order they are consumed."""

    def __init__(self, cfg, prev_ch, out_ch, skip_channels, time_dim, attention, upsample):
        super().__init__()
        self.resnets = nn.ModuleList(
            [make_resnet(cfg, (prev_ch if j == 0 else out_ch) + skip, out_ch, time_dim)
             for j, skip in enumerate(skip_channels)])
        self.attentions = nn.ModuleList(
            [make_transformer(cfg, out_ch) for _ in skip_channels]) if attention else None
        self.upsamplers = nn.ModuleList([Upsample(out_ch)]) if upsample else None

    def forward(self, h, skips, emb, context):                  # skips: a stack, newest last; consumed
        for j, resnet in enumerate(self.resnets):
            h = resnet(torch.cat([h, skips.pop()], dim=1), emb)  # (B, in + skip, H, W) -> (B, out, H, W)
            if self.attentions is not None:
                h = self.attentions[j](h, context)
        if self.upsamplers is not None:
            h = self.upsamplers[0](h)
        return h


class UNet(nn.Module):
    """forward(x (B, C_in, H, W), t (B,) flow time in [0, 1], class_labels (B,) long or None,
    context (B, L, D) or None) -> velocity (B, C_out, H, W). H and W must be multiples of 2^(L-1)."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        channels = cfg["block_out_channels"]
        levels = len(channels)
        n = cfg["layers_per_block"]
        time_dim = 4 * channels[0]

        self.time_embedding = TimestepEmbedding(channels[0], time_dim)
        num_classes = cfg.get("num_class_embeds", 0)
        self.class_embedding = nn.Embedding(num_classes, time_dim) if num_classes > 0 else None
        self.conv_in = nn.Conv2d(cfg["in_channels"], channels[0], 3, padding=1)

        # Channels of the skip stack as the down path pushes it: conv_in, each ResNet, each downsampler.
        skip_channels = [channels[0]]
        self.down_blocks = nn.ModuleList()
        for i, out_ch in enumerate(channels):
            in_ch = channels[max(i - 1, 0)]
            downsample = i < levels - 1
            self.down_blocks.append(
                DownBlock(cfg, in_ch, out_ch, time_dim, cfg["attention_levels"][i], downsample))
            skip_channels += [out_ch] * (n + (1 if downsample else 0))

        self.mid_block = MidBlock(cfg, channels[-1], time_dim)

        self.up_blocks = nn.ModuleList()
        prev_ch = channels[-1]
        for i in range(levels):
            level = levels - 1 - i
            consumed = [skip_channels.pop() for _ in range(n + 1)]
            self.up_blocks.append(UpBlock(cfg, prev_ch, channels[level], consumed, time_dim,
                                          cfg["attention_levels"][level], upsample=i < levels - 1))
            prev_ch = channels[level]

        if cfg["norm"] == "group":
            self.conv_norm_out = nn.GroupNorm(cfg["norm_num_groups"], channels[0], eps=cfg.get("norm_eps", 1e-5))
        else:
            self.conv_norm_out = None
        self.conv_out = nn.Conv2d(channels[0], cfg["out_channels"], 3, padding=1)

    def embed(self, t, class_labels):
        """(B,) flow time and labels -> (B, T) embedding shared by every ResNet."""
        cfg = self.cfg
        steps = t * cfg.get("timestep_scale", 1000.0)
        sinusoids = timestep_embedding(steps, cfg["block_out_channels"][0],
                                       cfg.get("flip_sin_to_cos", True), cfg.get("freq_shift", 0.0))
        # As diffusers: sinusoids in t's precision (float32 at least), then the network's dtype.
        emb = self.time_embedding(sinusoids.to(self.conv_in.weight.dtype))
        if self.class_embedding is not None:
            if class_labels is None:
                raise ValueError("this model is class-conditioned: class_labels are required")
            emb = emb + self.class_embedding(class_labels)
        return emb

    def forward(self, x, t, class_labels=None, context=None):
        emb = self.embed(t.to(torch.promote_types(x.dtype, torch.float32)), class_labels)  # (B, T)
        h = self.conv_in(x)                                       # (B, C_0, H, W)
        skips = [h]
        for block in self.down_blocks:
            h, block_skips = block(h, emb, context)
            skips += block_skips
        h = self.mid_block(h, emb, context)                       # (B, C_{L-1}, H / 2^(L-1), W / 2^(L-1))
        for block in self.up_blocks:
            h = block(h, skips, emb, context)
        if self.conv_norm_out is not None:
            h = F.silu(self.conv_norm_out(h))
        return self.conv_out(h)                                   # (B, C_out, H, W)

    def use_sdpa(self, on=True):
        """Fused attention kernels (flash, memory-efficient) as diffusers uses them: for benchmarks."""
        for module in self.modules():
            if isinstance(module, Attention):
                module.sdpa = on

    def parameter_count(self):
        return sum(p.numel() for p in self.parameters())

    def export_state(self):
        """The tensors of weights.safetensors: state_dict without BatchNorm's num_batches_tracked."""
        return {k: v for k, v in self.state_dict().items() if not k.endswith("num_batches_tracked")}

    def import_state(self, tensors):
        """Sets every tensor of export_state() from tensors (name -> array or tensor), exactly those names."""
        own = self.export_state()
        if set(tensors) != set(own):
            raise ValueError(f"names differ: missing {sorted(set(own) - set(tensors))[:5]}, "
                             f"unknown {sorted(set(tensors) - set(own))[:5]}")
        with torch.no_grad():
            for name, target in own.items():
                target.copy_(torch.as_tensor(tensors[name]))


def empty_model(cfg, device):
    """UNet(cfg) with uninitialised parameters on device: on PyTorch 2 without the default init or a CPU
    copy (an SD-class model is 3.5 GB of fp32), for weights that are set right after."""
    if hasattr(torch.device("meta"), "__enter__"):
        with torch.device("meta"):
            model = UNet(cfg)
        return model.to_empty(device=device)
    return UNet(cfg).to(device)
