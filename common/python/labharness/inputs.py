"""The lab's seeded inputs, bit for bit as common/harness/rng.h and problem.cpp make them.

splitmix64 is a counter: the n-th draw of a stream seeded with s is mix(s + (n + 1)·STEP), so a
whole tensor is one vectorised expression here, and the C++ side (which fills chunks in parallel
from state s + i·STEP) gives the same values. All arithmetic is modulo 2^64 (numpy uint64 wraps).
"""
import numpy as np

STEP = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
_CHUNK = 1 << 22  # elements per vectorised block (bounds the temporaries)


def splitmix64(seed, n, start=0):
    """Draws start .. start+n-1 of the stream seeded with `seed` (uint64 array)."""
    with np.errstate(over="ignore"):
        i = np.arange(start + 1, start + n + 1, dtype=np.uint64)
        z = np.uint64(seed) + i * STEP
        z = (z ^ (z >> np.uint64(30))) * _M1
        z = (z ^ (z >> np.uint64(27))) * _M2
        return z ^ (z >> np.uint64(31))


def symmetric(draws):
    """Rng::symmetric: float(next >> 40) * 2^-23 - 1, in float32: uniform in [-1, 1)."""
    return (draws >> np.uint64(40)).astype(np.float32) * np.float32(2.0 / 16777216.0) - np.float32(1.0)


def bf16_bits(x):
    """float32 -> bf16 bits, round to nearest even, NaN kept quiet (dtype.cpp's float_to_bf16_bits)."""
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    with np.errstate(over="ignore"):
        r = ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(x)
    if nan.any():
        r[nan] = ((u[nan] >> np.uint32(16)) | np.uint32(0x40)).astype(np.uint16)
    return r


def bf16_to_float(bits):
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << np.uint32(16)).view(np.float32)


def round_to(dtype, x):
    """Rounds float32 values to the element type and back (dtype.cpp's round_to)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "fp16":
        return x.astype(np.float16).astype(np.float32)  # IEEE round to nearest even, as the C++
    if dtype == "bf16":
        return bf16_to_float(bf16_bits(x))
    return x


def fill(n, seed, offset, scale, dtype):
    """problem.cpp's fill(): (symmetric() + offset) * scale, rounded to dtype; float32 values."""
    out = np.empty(n, dtype=np.float32)
    for lo in range(0, n, _CHUNK):
        hi = min(n, lo + _CHUNK)
        v = (symmetric(splitmix64(seed, hi - lo, lo)) + np.float32(offset)) * np.float32(scale)
        out[lo:hi] = round_to(dtype, v)
    return out


def make_inputs(p, seed, magnitude):
    """make_inputs of problem.cpp: Q [B,T_q,H,D], K/V [B,T_kv,H_kv,D] as float32 (exact dtype values)."""
    s = np.uint64(seed)
    with np.errstate(over="ignore"):
        q = fill(p.q_elems, s * np.uint64(3) + np.uint64(1), 0.25, magnitude, p.dtype)
        k = fill(p.kv_elems, s * np.uint64(3) + np.uint64(2), 0.25, magnitude, p.dtype)
        v = fill(p.kv_elems, s * np.uint64(3) + np.uint64(3), 0.5, 1.0, p.dtype)
    return (q.reshape(p.b, p.t_q, p.h, p.d), k.reshape(p.b, p.t_kv, p.h_kv, p.d),
            v.reshape(p.b, p.t_kv, p.h_kv, p.d))


def to_storage(x, dtype):
    """float32 values -> the array of the element type's bits a kernel reads (bf16 as uint16)."""
    if dtype == "fp16":
        return x.astype(np.float16)
    if dtype == "bf16":
        return bf16_bits(x)
    return np.ascontiguousarray(x, dtype=np.float32)


POISON16 = np.uint16(0xFFFF)


def poisoned(shape, dtype):
    """An output buffer filled with all-ones bits (a NaN in fp32, fp16 and bf16), as the C++ poisons."""
    if dtype == "fp32":
        return np.full(shape, 0xFFFFFFFF, dtype=np.uint32).view(np.float32)
    a = np.full(shape, 0xFFFF, dtype=np.uint16)
    return a.view(np.float16) if dtype == "fp16" else a


# A quiet NaN that is not the poison: what the guard regions after the inputs hold, so that a value
# read from there is NaN in the output, never taken for an element left unwritten.
NAN_BITS = {"fp16": 0x7E00, "bf16": 0x7FC0, "fp32": 0x7FC00000}
POISON_BITS = {"fp16": 0xFFFF, "bf16": 0xFFFF, "fp32": 0xFFFFFFFF}


def bits_of(x):
    """The raw bits of a storage array (2- or 4-byte elements) as unsigned integers, a view."""
    return x.view(np.uint16 if x.itemsize == 2 else np.uint32)


def guarded(x, extra, bits):
    """x flattened into a buffer `extra` elements longer, those (the guard region) set to the bit
    pattern `bits`."""
    whole = np.empty(x.size + extra, dtype=x.dtype)
    whole[:x.size] = np.asarray(x).reshape(-1)
    bits_of(whole)[x.size:] = bits
    return whole


def from_storage(x, dtype):
    """The element type's array -> float32, all-ones bits (poison) kept as the fp32 poison."""
    if dtype == "fp32":
        return np.asarray(x, dtype=np.float32)
    bits = np.asarray(x).view(np.uint16)
    f = np.asarray(x).astype(np.float32) if dtype == "fp16" else bf16_to_float(bits)
    f[bits == POISON16] = np.uint32(0xFFFFFFFF).view(np.float32)
    return f


def is_poison(f):
    return np.asarray(f, dtype=np.float32).view(np.uint32) == np.uint32(0xFFFFFFFF)
