#!/usr/bin/env python3
"""llama.cpp's own 8-bit KV cache (q8_0 K and V) against its f16 one, measured the way
model_golden_test measures ember's int8 KV cache: teacher-forced on the golden text, top-1
agreement with llama.cpp on F32 weights (the golden file) for each cache, and the mean KL(f16
cache || q8_0 cache) over the full vocabulary. The bar issue 21 sets for ember's cache.

Run with the reference venv's python (tests/reference/setup_venv.sh prints its path):

    python benchmarks/llama_kv_quality.py --model ~/.cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf \
        --golden tests/data/reference/smollm2_f32_teacher_forced.json

The F32 copy of the model is written beside it on first use (as make_model_goldens.py does).
"""
import argparse
import json
import os
import sys

import numpy as np
from llama_cpp import Llama

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests", "reference"))
from make_model_goldens import N_CTX, N_THREADS, write_f32_copy  # noqa: E402

GGML_TYPE_Q8_0 = 8


def log_softmax(rows):
    rows = rows.astype(np.float64)
    peak = rows.max(axis=1, keepdims=True)
    return rows - peak - np.log(np.exp(rows - peak).sum(axis=1, keepdims=True))


def logits(model, tokens, kv_type):
    kwargs = dict(type_k=kv_type, type_v=kv_type, flash_attn=True) if kv_type is not None else {}
    llm = Llama(model, n_ctx=N_CTX, n_threads=N_THREADS, n_threads_batch=N_THREADS, logits_all=True,
                verbose=False, **kwargs)
    llm.eval(tokens[:-1])
    return np.array(llm.scores[: len(tokens) - 1], dtype=np.float32)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", required=True, help="the GGUF the golden was made from")
    parser.add_argument("--golden", required=True, help="PREFIX_f32_teacher_forced.json")
    args = parser.parse_args()
    f32_path = os.path.splitext(args.model)[0] + ".F32.gguf"
    if not os.path.exists(f32_path):
        write_f32_copy(args.model, f32_path)
    with open(args.golden) as f:
        golden = json.load(f)
    tokens = golden["tokens"]
    reference = np.array([p["ids"][0] for p in golden["positions"]])
    f16 = logits(f32_path, tokens, None)  # llama.cpp's default cache: f16
    q8 = logits(f32_path, tokens, GGML_TYPE_Q8_0)
    for name, rows in (("f16 KV", f16), ("q8_0 KV", q8)):
        print(f"{name}: top-1 agreement with the golden {np.mean(rows.argmax(axis=1) == reference):.2%}")
    kl = 0.0
    for at in range(0, len(reference), 64):  # in slices: Gemma 3's rows are 262,144 wide
        lp16, lp8 = log_softmax(f16[at:at + 64]), log_softmax(q8[at:at + 64])
        kl += np.sum(np.exp(lp16) * (lp16 - lp8))
    kl /= len(reference)
    print(f"q8_0 KV against f16 KV: top-1 agreement {np.mean(f16.argmax(axis=1) == q8.argmax(axis=1)):.2%}, "
          f"mean KL {kl:.6f} over {len(reference)} positions")


if __name__ == "__main__":
    main()
