#!/usr/bin/env python3
"""Writes llama.cpp's logits on small synthetic models with a synthetic LoRA adapter.

For each case, ember-make-synthetic writes an F32 model of one architecture
(SyntheticModelSpec::architecture_config) and a LoRA adapter for it (--adapter: random F32
lora_a/lora_b pairs at a rank and alpha, on chosen tensors), and llama.cpp runs the tokens with
the adapter at a scale (Llama(lora_path=..., lora_scale=...)). tests/backend/test_lora.cpp
writes the same two files in memory and compares ember's FP32 logits with these, within the
bounds of the architectures' goldens (make_arch_goldens.py).

Run with the reference venv's python:

    ~/.cache/ember/venv-ref-avx2/bin/python tests/reference/make_lora_goldens.py \\
        --make-synthetic build/benchmarks/ember-make-synthetic --out tests/data/reference/lora_goldens.json
"""
import argparse
import hashlib
import json
import os
import subprocess
import tempfile

import llama_cpp
import numpy as np
from llama_cpp import Llama

# name: (architecture, rank, alpha, tensors ("" = all), scale, adapter seed)
CASES = {
    "llama3_all": ("llama3", 8, 16.0, "", 0.75, 7),
    "qwen2_qv": ("qwen2", 4, 8.0, "attn_q,attn_v,output", 1.0, 11),
    "phi3_fused": ("phi3", 8, 0.0, "attn_qkv,ffn_up,ffn_down", 0.5, 13),
}
N_CTX = 128
POSITIONS = 24
SEED = 20261205


def tokens_for(vocab):
    rng = np.random.default_rng(SEED)
    return [int(t) for t in rng.integers(3, vocab, size=POSITIONS)]


def sha256(path):
    with open(path, "rb") as f:
        data = f.read()
    return len(data), hashlib.sha256(data).hexdigest()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--make-synthetic", required=True, help="path of ember-make-synthetic")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    doc = {"llama_cpp_python": llama_cpp.__version__, "positions": POSITIONS, "cases": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name, (arch, rank, alpha, tensors, scale, seed) in CASES.items():
            model = os.path.join(tmp, name + ".gguf")
            adapter = os.path.join(tmp, name + ".lora.gguf")
            cmd = [args.make_synthetic, arch, model, os.path.join(tmp, name + ".json"), "--adapter", adapter,
                   "--adapter-rank", str(rank), "--adapter-alpha", str(alpha), "--adapter-seed", str(seed)]
            if tensors:
                cmd += ["--adapter-tensors", tensors]
            subprocess.run(cmd, check=True)
            rows = {}
            for label, kwargs in (("base", {}), ("adapted", {"lora_path": adapter, "lora_scale": scale})):
                llm = Llama(model, n_ctx=N_CTX, n_threads=2, n_threads_batch=2, logits_all=True, verbose=False,
                            **kwargs)
                vocab = llm.n_vocab()
                tokens = tokens_for(vocab)
                llm.eval(tokens)
                rows[label] = np.array(llm.scores[:POSITIONS], dtype=np.float32)
                del llm
            model_bytes, model_sha = sha256(model)
            adapter_bytes, adapter_sha = sha256(adapter)
            change = float(np.abs(rows["adapted"] - rows["base"]).max())
            doc["cases"][name] = {
                "architecture": arch, "rank": rank, "alpha": alpha, "tensors": tensors, "scale": scale,
                "adapter_seed": seed, "model_bytes": model_bytes, "model_sha256": model_sha,
                "adapter_bytes": adapter_bytes, "adapter_sha256": adapter_sha, "vocab": vocab,
                "tokens": tokens, "max_change_from_base": round(change, 4),
                "logits": [[round(float(v), 4) for v in row] for row in rows["adapted"]],
            }
            print(f"{name}: adapter {adapter_bytes} bytes, logits moved by up to {change:.3f} from the base")
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, separators=(",", ":"))
        f.write("\n")
    print(f"wrote {args.out} ({os.path.getsize(args.out)} bytes)")


if __name__ == "__main__":
    main()
