#!/usr/bin/env python3
"""PyTorch/transformers FP16 baseline for the GPU check: a randomly initialised
LlamaForCausalLM of the same configuration as an ember synthetic model (the JSON that
ember-make-synthetic writes), running the same workloads as ember-bench --device cuda:

  tg128     batch-1 greedy generate of 128 tokens after a 16-token prompt (decode tokens/s)
  tg128x32  32 such prompts in one generate call (aggregate generated tokens/s)
  pp512     one forward pass over 512 prompt tokens (tokens/s)

Eager mode, no downloads: the model is built from the config alone.

  torch_generate.py --config default.json --out torch_default.json [--repeats 3]
"""
import argparse
import json
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def timed(fn, repeats):
    fn()  # warm-up (kernel selection, allocator)
    runs = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        runs.append(time.perf_counter() - start)
    return statistics.median(runs)


def generate(model, prompt, new_tokens):
    with torch.inference_mode():
        model.generate(prompt, max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False,
                       pad_token_id=0, eos_token_id=None)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    with open(args.config) as f:
        cfg = json.load(f)
    torch.manual_seed(0)
    config = LlamaConfig(**cfg, attention_bias=False, mlp_bias=False, hidden_act="silu")
    model = LlamaForCausalLM(config).to(device="cuda", dtype=torch.float16).eval()
    vocab = cfg["vocab_size"]
    one = torch.randint(3, vocab, (1, 16), device="cuda")
    many = torch.randint(3, vocab, (32, 16), device="cuda")
    long = torch.randint(3, vocab, (1, 512), device="cuda")

    # Decode rate as ember-bench measures it: the time of tokens 2..128 (prefill excluded).
    t128 = timed(lambda: generate(model, one, 128), args.repeats)
    t1 = timed(lambda: generate(model, one, 1), args.repeats)
    t32 = timed(lambda: generate(model, many, 128), args.repeats)

    def prefill():
        with torch.inference_mode():
            model(long)

    tpp = timed(prefill, args.repeats)
    results = [
        {"engine": "torch-fp16-eager", "workload": "tg128", "tokens_per_s": 127 / (t128 - t1)},
        {"engine": "torch-fp16-eager", "workload": "tg128x32", "tokens_per_s": 32 * 128 / t32},
        {"engine": "torch-fp16-eager", "workload": "pp512", "tokens_per_s": 512 / tpp},
    ]
    for r in results:
        r["config"] = args.config
        print(f"torch fp16 {r['workload']:9s} {r['tokens_per_s']:10.1f} tokens/s")
    with open(args.out, "w") as f:
        json.dump(results, f, indent=2)


if __name__ == "__main__":
    main()
