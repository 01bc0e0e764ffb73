"""Random weights from a counter-based generator: the same values as rtvd's pipeline/random_weights.cpp.

Each value depends only on (seed, parameter name, element index), so the C++ engine can make the weights
of a PyTorch golden itself instead of reading them from a file too large to commit, and a benchmark's
random weights are the reference's. The rules (keep in step with the C++):

    key     = mix(seed ^ fnv1a64(name))
    bits_i  = mix(key + (i + 1) * GOLDEN)                       (mod 2^64; mix = splitmix64's output function)
    j_i     = ((bits_i >> 32) * levels) >> 32                   uniform in [0, levels), levels = 2 radius + 1
    value_i = float32(center - radius + j_i) * float32(step)   one float32 multiply, then rounded to the dtype

with (center, radius, step) per tensor: conv/linear weights and embeddings (2+ dims) (0, 1024,
sqrt(3 / fan_in) / 1024), variance 1 / fan_in; running variances (1024, 512, 1/1024), [0.5, 1.5]; other
".weight" (norm scales) (1024, 205, 1/1024), 1 +- 0.2; everything else (biases, running means)
(0, 102, 1/1024), +-0.1.
"""
import math
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

GOLDEN = 0x9E3779B97F4A7C15
MASK = (1 << 64) - 1
CHUNK = 1 << 22  # elements per numpy pass: bounded temporaries, and work for every thread


def _mix(z):
    """splitmix64's output function on a uint64 numpy array (wrapping arithmetic)."""
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def _mix_int(z):
    """The same on a Python int."""
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def _fnv1a(name):
    h = 0xCBF29CE484222325
    for byte in name.encode("utf-8"):
        h = ((h ^ byte) * 0x100000001B3) & MASK
    return h


def distribution(name, shape):
    """(center, radius, step) of a tensor's values."""
    if len(shape) >= 2:
        fan_in = math.prod(shape[1:])
        return 0, 1024, np.float32(math.sqrt(3.0 / fan_in) / 1024)
    if name.endswith(".running_var"):
        return 1024, 512, np.float32(1 / 1024)
    if name.endswith(".weight"):
        return 1024, 205, np.float32(1 / 1024)
    return 0, 102, np.float32(1 / 1024)


def _fill(out, key, levels, table, begin):
    """Values begin .. begin + len(out) of a tensor into out."""
    with np.errstate(over="ignore"):
        index = np.arange(begin + 1, begin + 1 + out.size, dtype=np.uint64)
        bits = _mix(np.uint64(key) + index * np.uint64(GOLDEN))
        j = ((bits >> np.uint64(32)) * np.uint64(levels)) >> np.uint64(32)
    out[:] = table[j.astype(np.int64)]


def parameter(seed, name, shape, dtype=np.float32, pool=None):
    """The tensor's values as a numpy array of dtype float32 or float16 (rounded to nearest even)."""
    center, radius, step = distribution(name, shape)
    levels = 2 * radius + 1
    table = (np.arange(center - radius, center + radius + 1).astype(np.float32) * step).astype(dtype)
    key = _mix_int(seed ^ _fnv1a(name))
    out = np.empty(math.prod(shape), dtype=dtype)
    chunks = [(out[b:b + CHUNK], key, levels, table, b) for b in range(0, out.size, CHUNK)]
    if pool is None or len(chunks) == 1:
        for c in chunks:
            _fill(*c)
    else:
        list(pool.map(lambda c: _fill(*c), chunks))
    return out.reshape(shape)


def state_dict(seed, shapes, dtype=np.float32):
    """name -> array for every (name, shape) of `shapes`, on all cores (numpy releases the GIL)."""
    with ThreadPoolExecutor(os.cpu_count()) as pool:
        return {name: parameter(seed, name, tuple(shape), dtype, pool) for name, shape in shapes.items()}
