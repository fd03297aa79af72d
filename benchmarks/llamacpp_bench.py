#!/usr/bin/env python3
"""Measures llama.cpp (through llama-cpp-python) on a GGUF, in the JSON shape ember-bench writes.

    python benchmarks/llamacpp_bench.py --model PATH --threads N --workload pp512|tg128 \
        --repeats R --json FILE

Workloads:
  pp512  prompt processing: one batch of 512 tokens (n_batch = n_ubatch = 512) into an empty KV
         cache; tokens/s = 512 / wall time of that decode.
  tg128  generation: a 16-token prompt, then 128 single-token decodes, each feeding the argmax of
         the previous logits; tokens/s = 128 / wall time of those 128 decodes (prompt excluded).
Each repeat starts from an empty KV cache. One untimed warm-up run precedes the timed ones.
The JSON file holds one object (see tests/reference/README.md for its fields).
"""
import argparse
import json
import statistics
import time

import llama_cpp
import numpy as np
from llama_cpp import Llama

PP_TOKENS = 512
TG_PROMPT = 16
TG_TOKENS = 128

# general.file_type values of the llama.cpp file formats ember may be compared on.
FILE_TYPES = {0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
              10: "Q2_K", 12: "Q3_K_M", 14: "Q4_K_S", 15: "Q4_K_M", 17: "Q5_K_M", 18: "Q6_K",
              32: "BF16"}


def file_precision(llm):
    file_type = llm.metadata.get("general.file_type")
    if file_type is None:
        return "unknown"
    return FILE_TYPES.get(int(file_type), f"file_type_{file_type}")


def workload_tokens(llm, count):
    """Ordinary text tokens, so the run resembles real use (the content does not change speed)."""
    text = ("The lighthouse keeper wrote in her ledger every night: the wind, the ships, the "
            "birds, and the thoughts that came while the lamp turned. ") * 64
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
    if len(tokens) < count:
        raise SystemExit(f"workload text yields only {len(tokens)} tokens, need {count}")
    return tokens[:count]


def run_pp(llm, prompt):
    llm.reset()  # the next eval removes every KV cell from position 0 on
    start = time.perf_counter()
    llm.eval(prompt)
    return len(prompt) / (time.perf_counter() - start)


def run_tg(llm, prompt):
    llm.reset()
    llm.eval(prompt)
    elapsed = 0.0
    for _ in range(TG_TOKENS):
        token = int(np.argmax(llm.scores[llm.n_tokens - 1]))
        start = time.perf_counter()
        llm.eval([token])
        elapsed += time.perf_counter() - start
    return TG_TOKENS / elapsed


def measure(llm, workload, threads, repeats):
    if workload == "pp512":
        prompt, run = workload_tokens(llm, PP_TOKENS), run_pp
    else:
        prompt, run = workload_tokens(llm, TG_PROMPT), run_tg
    run(llm, prompt)  # warm-up: page in the weights, size the compute buffers
    runs = [round(run(llm, prompt), 3) for _ in range(repeats)]
    return {
        "engine": "llama.cpp",
        "workload": workload,
        "precision": file_precision(llm),
        "threads": threads,
        "tokens_per_s": {"median": round(statistics.median(runs), 3), "min": min(runs),
                         "max": max(runs)},
        "runs": runs,
        "llama_cpp_python": llama_cpp.__version__,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--workload", choices=["pp512", "tg128"], required=True)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--json", help="write the result object here")
    args = parser.parse_args()
    if args.repeats < 1:
        parser.error("--repeats must be at least 1")

    # logits_all=False: only the last position's logits are computed and copied, as in serving.
    llm = Llama(args.model, n_ctx=1024, n_batch=PP_TOKENS, n_ubatch=PP_TOKENS,
                n_threads=args.threads, n_threads_batch=args.threads, logits_all=False,
                verbose=False)
    result = measure(llm, args.workload, args.threads, args.repeats)
    speed = result["tokens_per_s"]
    print(f"llama.cpp {result['precision']} {args.workload} threads={args.threads}: "
          f"median {speed['median']:.1f} tok/s (min {speed['min']:.1f}, "
          f"max {speed['max']:.1f}, {args.repeats} runs)", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(result, f, indent=1)
            f.write("\n")


if __name__ == "__main__":
    main()
