"""Minimal safetensors writer and reader for dicts of numpy arrays.

Ours rather than the `safetensors` package so that the reference tools run on machines without it.
Format: 8-byte little-endian header length N, N bytes of JSON header
{name: {dtype, shape, data_offsets: [begin, end]}} (plus an optional "__metadata__" of strings),
space-padded so the data starts at a multiple of 8, then the tensors' bytes, contiguous, in header order.
"""
import json
import struct

import numpy as np

# numpy dtype -> safetensors spelling; every array is stored little-endian.
_DTYPE_NAMES = {
    np.dtype("float64"): "F64",
    np.dtype("float32"): "F32",
    np.dtype("float16"): "F16",
    np.dtype("int64"): "I64",
    np.dtype("int32"): "I32",
    np.dtype("int16"): "I16",
    np.dtype("int8"): "I8",
    np.dtype("uint8"): "U8",
    np.dtype("bool"): "BOOL",
}
_NAME_DTYPES = {name: dtype for dtype, name in _DTYPE_NAMES.items()}


def write(path, tensors, metadata=None):
    """Writes tensors (name -> numpy array, in dict order) and optional metadata (str -> str) to path."""
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    blobs = []
    offset = 0
    for name, array in tensors.items():
        array = np.asarray(array)
        if array.dtype not in _DTYPE_NAMES:
            raise ValueError(f"{name}: dtype {array.dtype} has no safetensors spelling here")
        blob = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<")).tobytes()
        header[name] = {
            "dtype": _DTYPE_NAMES[array.dtype],
            "shape": list(array.shape),
            "data_offsets": [offset, offset + len(blob)],
        }
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read(path):
    """Returns (tensors: name -> numpy array in file order, metadata: dict) of a safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (header_len,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + header_len].decode("utf-8"))
    metadata = header.pop("__metadata__", {})
    data = raw[8 + header_len:]
    tensors = {}
    for name, info in header.items():
        begin, end = info["data_offsets"]
        dtype = _NAME_DTYPES[info["dtype"]].newbyteorder("<")
        array = np.frombuffer(data[begin:end], dtype=dtype).reshape(info["shape"])
        tensors[name] = array.astype(dtype.newbyteorder("="))
    return tensors, metadata
