#!/usr/bin/env python3
"""Writes llama.cpp's logits on a small synthetic model of every architecture ember runs.

Each model is written by ember's own GGUF writer (ember-make-synthetic SHAPE, with the shapes
of SyntheticModelSpec::architecture_config: llama3, qwen2, qwen3, gemma3, phi3, phi3_long; F32 weights, the
real tensor names and metadata), so llama.cpp and ember compute from the very same file.
tests/backend/test_arch_golden.cpp regenerates the file in memory and compares ember's FP32
logits with these. With --moe, the mixture-of-experts shapes instead (qwen3moe, olmoe, mixtral),
written to their own file (tests/data/reference/moe_goldens.json) so that the dense goldens
stay as they were made.

Run with the reference venv's python (tests/reference/setup_venv.sh prints its path):

    python tests/reference/make_arch_goldens.py --make-synthetic build/benchmarks/ember-make-synthetic \\
        --out tests/data/reference/arch_goldens.json
    python tests/reference/make_arch_goldens.py --make-synthetic build/benchmarks/ember-make-synthetic \
        --moe --out tests/data/reference/moe_goldens.json
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

import llama_cpp
import numpy as np
from llama_cpp import Llama

ARCHITECTURES = ["llama3", "qwen2", "qwen3", "gemma3", "phi3", "phi3_long"]
MOE_ARCHITECTURES = ["qwen3moe", "olmoe", "mixtral"]
N_CTX = 128  # test_arch_golden.cpp adapts the model to the same context (ModelConfig::use_context)
# Longer than gemma3's sliding window of 8, so its sliding layers really slide.
POSITIONS = 24
SEED = 20261201


def tokens_for(vocab):
    rng = np.random.default_rng(SEED)
    return [int(t) for t in rng.integers(3, vocab, size=POSITIONS)]  # 0-2 are special


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make-synthetic", required=True, help="path of ember-make-synthetic")
    parser.add_argument("--out", required=True)
    parser.add_argument("--moe", action="store_true", help="the mixture-of-experts shapes")
    args = parser.parse_args()

    doc = {"llama_cpp_python": llama_cpp.__version__, "positions": POSITIONS, "models": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for arch in MOE_ARCHITECTURES if args.moe else ARCHITECTURES:
            path = os.path.join(tmp, arch + ".gguf")
            subprocess.run([args.make_synthetic, arch, path, os.path.join(tmp, arch + ".json")],
                           check=True)
            with open(path, "rb") as f:
                data = f.read()
            llm = Llama(path, n_ctx=N_CTX, n_threads=2, n_threads_batch=2, logits_all=True,
                        verbose=False)
            vocab = llm.n_vocab()
            tokens = tokens_for(vocab)
            llm.eval(tokens)
            logits = np.array(llm.scores[:POSITIONS], dtype=np.float32)
            doc["models"][arch] = {
                "file_bytes": len(data),
                "file_sha256": hashlib.sha256(data).hexdigest(),
                "vocab": vocab,
                "tokens": tokens,
                "logits": [[round(float(v), 4) for v in row] for row in logits],
            }
            print(f"{arch}: {len(data)} bytes, {POSITIONS} positions x {vocab} logits, "
                  f"argmax of the last {int(logits[-1].argmax())}")
            del llm
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    sys.exit(main())
