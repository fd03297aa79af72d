#!/usr/bin/env python3
"""Writes dequantization and quantization goldens for ember's GGUF type code.

Run with the reference venv (it has the `gguf` and `numpy` packages):
    /root/.cache/ember/venv-ref/bin/python tests/reference/make_dequant_goldens.py

For every tensor type, a few blocks of random raw bytes (with finite fp16 scale fields) and the
FP32 values `gguf.quants.dequantize` gives for them, as
tests/data/model/dequant/<TYPE>.json = {"type", "type_id", "elements", "raw_hex", "values_hex"}
where values_hex holds the little-endian float32 bits. For the types ember's writer can produce
(F16, BF16, Q8_0, Q4_0, Q4_1), quantize_<TYPE>.json holds random FP32 input and the bytes
`gguf.quants.quantize` makes from it.
"""
import json
import pathlib

import numpy as np
from gguf import GGMLQuantizationType as T
from gguf import quants
from gguf.constants import GGML_QUANT_SIZES

OUT = pathlib.Path(__file__).resolve().parents[1] / "data" / "model" / "dequant"
RNG = np.random.default_rng(20240611)


def f16_bytes(n):
    """n finite fp16 values in [-2, 2] (scales), as bytes."""
    return RNG.uniform(-2.0, 2.0, n).astype(np.float16).tobytes()


def set_f16(block, offset):
    block[offset:offset + 2] = np.frombuffer(f16_bytes(1), dtype=np.uint8)


# Byte offsets of the fp16 scale fields inside one block of each type.
SCALE_FIELDS = {
    T.Q4_0: [0], T.Q4_1: [0, 2], T.Q5_0: [0], T.Q5_1: [0, 2], T.Q8_0: [0],
    T.Q2_K: [80, 82], T.Q3_K: [108], T.Q4_K: [0, 2], T.Q5_K: [0, 2], T.Q6_K: [208],
}


def random_raw(qtype, blocks):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    if qtype == T.F32:
        return RNG.uniform(-4, 4, blocks * block_elems).astype(np.float32).tobytes()
    if qtype == T.F16:
        return f16_bytes(blocks * block_elems)
    if qtype == T.BF16:
        vals = RNG.uniform(-4, 4, blocks * block_elems).astype(np.float32)
        return (vals.view(np.uint32) >> 16).astype(np.uint16).tobytes()
    raw = RNG.integers(0, 256, blocks * block_bytes, dtype=np.uint8).reshape(blocks, block_bytes)
    for b in range(blocks):
        for off in SCALE_FIELDS[qtype]:
            set_f16(raw[b], off)
    return raw.tobytes()


def dequant_case(qtype, blocks):
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    raw = random_raw(qtype, blocks)
    n = blocks * block_elems
    data = np.frombuffer(raw, dtype=np.uint8).reshape(1, len(raw))
    values = quants.dequantize(data, qtype).astype(np.float32).reshape(-1)
    assert values.size == n and np.all(np.isfinite(values)), qtype.name
    return {"type": qtype.name, "type_id": int(qtype), "elements": n,
            "raw_hex": raw.hex(), "values_hex": values.astype("<f4").tobytes().hex()}


def quant_case(qtype, blocks):
    block_elems, _ = GGML_QUANT_SIZES[qtype]
    values = RNG.normal(0, 1, blocks * block_elems).astype(np.float32)
    values[:4] = [0.0, -0.0, 1e-3, -2.5]  # zero and small magnitudes exercise the edge cases
    if blocks > 1:  # one all-zero block: the scale is 0 and the inverse scale must be 0 too
        values[block_elems:2 * block_elems] = 0.0
    raw = quants.quantize(values.reshape(1, -1), qtype).reshape(-1)
    return {"type": qtype.name, "type_id": int(qtype), "elements": int(values.size),
            "values_hex": values.astype("<f4").tobytes().hex(), "raw_hex": raw.tobytes().hex()}


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    plain = [T.F32, T.F16, T.BF16]
    legacy = [T.Q4_0, T.Q4_1, T.Q5_0, T.Q5_1, T.Q8_0]
    kquants = [T.Q2_K, T.Q3_K, T.Q4_K, T.Q5_K, T.Q6_K]
    for qtype in plain + legacy + kquants:
        blocks = 64 if qtype in plain else 8 if qtype in legacy else 3
        case = dequant_case(qtype, blocks)
        (OUT / f"{qtype.name}.json").write_text(json.dumps(case) + "\n")
    for qtype in [T.F16, T.BF16, T.Q8_0, T.Q4_0, T.Q4_1]:
        blocks = 64 if qtype in plain else 8
        case = quant_case(qtype, blocks)
        (OUT / f"quantize_{qtype.name}.json").write_text(json.dumps(case) + "\n")


if __name__ == "__main__":
    main()
