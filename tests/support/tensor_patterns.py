"""Test tensors whose bytes are every bit pattern, and their bytes to compare
(bit for bit: NaN payloads and -0.0 included). Needs torch."""
import torch


def pattern(shape, dtype, seed):
    """Bytes (151 i + seed) % 256 viewed as `dtype`: every bit pattern, NaN payloads included."""
    size = torch.empty(0, dtype=dtype).element_size()
    n = 1
    for s in shape:
        n *= s
    raw = ((torch.arange(n * size, dtype=torch.int64) * 151 + seed) % 256).to(torch.uint8)
    if dtype == torch.bool:
        return (raw % 2).view(torch.bool).reshape(shape)
    return raw.view(dtype).reshape(shape)


def bits(t):
    """The bytes of `t`, contiguous, as uint8 (empty tensors included)."""
    return t.contiguous().reshape(-1).view(torch.uint8)
