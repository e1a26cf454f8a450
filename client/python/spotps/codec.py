"""Tensor payloads on the wire: FP32 values <-> little-endian FP32 or BF16 bytes.

The same encoding as common/tensor_codec.h: BF16 is the top half of an FP32,
rounded to nearest even.
"""

import numpy as np

from spotps.v1 import parameter_server_pb2 as pb

FP32 = pb.DTYPE_FP32
BF16 = pb.DTYPE_BF16

_NAMES = {"fp32": FP32, "float32": FP32, "bf16": BF16, "bfloat16": BF16}


def wire_dtype(dtype):
    """The wire enum for "fp32"/"bf16" (or the enum itself); ValueError otherwise."""
    if isinstance(dtype, str):
        if dtype.lower() not in _NAMES:
            raise ValueError(f"unknown wire dtype {dtype!r} (use 'fp32' or 'bf16')")
        return _NAMES[dtype.lower()]
    if dtype not in (FP32, BF16):
        raise ValueError(f"unknown wire dtype {dtype!r}")
    return dtype


def bytes_per_element(dtype):
    return 4 if dtype == FP32 else 2


def encode(values, dtype):
    """Bytes of `values` (a 1-D float32 array) as `dtype`."""
    values = np.ascontiguousarray(values, dtype=np.float32)
    if dtype == FP32:
        return values.astype("<f4", copy=False).tobytes()
    bits = values.view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)
    return rounded.astype("<u2").tobytes()


def decode(data, dtype):
    """The float32 values of payload bytes `data` of `dtype`."""
    if dtype == FP32:
        return np.frombuffer(data, dtype="<f4").astype(np.float32, copy=False)
    halves = np.frombuffer(data, dtype="<u2").astype(np.uint32)
    return (halves << np.uint32(16)).view(np.float32)
