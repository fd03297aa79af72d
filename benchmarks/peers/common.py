"""What every peer driver shares: the workload shapes, the token ids they run on, and the
summary statistics, so that llama.cpp and CTranslate2 are measured exactly alike.

The shapes equal ember-bench's (benchmarks/serving_workload.hpp). The peers' prompts are cut from
the committed golden text (tests/data/reference/smollm2_teacher_forced.json, already tokenized
with the default model's tokenizer); the content does not change the speed, only the lengths and
the shared prefix do.
"""
import argparse
import json
import os
import statistics
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GOLDEN = os.path.join(REPO, "tests", "data", "reference", "smollm2_teacher_forced.json")

PP_TOKENS = 512
TG_PROMPT, TG_TOKENS = 16, 128
SHARED = {"requests": 32, "system_tokens": 512, "unique_tokens": 32, "generated_tokens": 64}
CHAT = {"turns": 8, "system_tokens": 64, "user_tokens": 48, "reply_tokens": 32}
WORKLOADS = ("pp512", "tg128", "tg128x32", "shared", "chat", "cold", "quality")


def golden_tokens():
    with open(GOLDEN, encoding="utf-8") as f:
        return json.load(f)["tokens"]


def text_tokens(count, offset=0):
    """`count` consecutive golden-text tokens from `offset`, wrapping around."""
    tokens = golden_tokens()
    return [tokens[(offset + i) % len(tokens)] for i in range(count)]


def shared_prompts(requests):
    """(common prefix, [unique suffix per request]); suffixes start at different text offsets."""
    prefix = text_tokens(SHARED["system_tokens"])
    step = SHARED["unique_tokens"] // 2 + 1
    suffixes = [text_tokens(SHARED["unique_tokens"], 600 + i * step) for i in range(requests)]
    return prefix, suffixes


def chat_user_turn(turn):
    return text_tokens(CHAT["user_tokens"], 200 + turn * 97)


def percentile(values, p):
    """The nearest-rank percentile ember-bench uses (benchmarks/serving_workload.cpp)."""
    v = sorted(values)
    return v[min(len(v) - 1, int(p * (len(v) - 1) + 0.5))]


def summarize_requests(ttft_ms, response_ms, generated, wall_s):
    """The serving metrics of one run from per-request times (ms, measured from submission)."""
    tpot = [(r - t) / (g - 1) for t, r, g in zip(ttft_ms, response_ms, generated) if g > 1]
    return {
        "requests": len(ttft_ms),
        "ttft_ms": {"mean": statistics.fmean(ttft_ms), "p99": percentile(ttft_ms, 0.99)},
        "response_ms": {"mean": statistics.fmean(response_ms), "p50": percentile(response_ms, 0.5),
                        "p99": percentile(response_ms, 0.99)},
        "tpot_ms": statistics.fmean(tpot) if tpot else 0.0,
        "requests_per_s": len(ttft_ms) / wall_s,
        "generated_tokens_per_s": sum(generated) / wall_s,
        "wall_s": wall_s,
    }


def log_softmax(rows):
    rows = np.asarray(rows, dtype=np.float64)
    shifted = rows - rows.max(axis=1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))


def compare_logits(reference_path, logits):
    """Teacher-forced top-1 agreement and mean KL(reference || engine) over the full vocabulary,
    `logits` [positions, vocab] against ember's fp32 logits saved by ember-logits."""
    reference = np.load(reference_path, mmap_mode="r")
    n = min(len(reference), len(logits))
    agree, kl = 0, 0.0
    for i in range(0, n, 128):
        p, q = log_softmax(reference[i:min(i + 128, n)]), log_softmax(logits[i:min(i + 128, n)])
        agree += int((p.argmax(axis=1) == q.argmax(axis=1)).sum())
        kl += float((np.exp(p) * (p - q)).sum())
    return {"positions": n, "top1_agreement": agree / n, "mean_kl": kl / n}


def requantized_q8_path(cache, model):
    """Where the benchmarks keep llama.cpp's Q8_0 requantization of `model`, in the cache directory."""
    return os.path.join(cache, f"{os.path.splitext(os.path.basename(model))[0]}.requantized-Q8_0.gguf")


def driver_args(description, argv=None):
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("workload", choices=WORKLOADS)
    parser.add_argument("--model", required=True, help="the engine's model (file or directory)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--requests", type=int, default=SHARED["requests"])
    parser.add_argument("--turns", type=int, default=CHAT["turns"])
    parser.add_argument("--positions", type=int, default=0, help="quality: positions (0 = all)")
    parser.add_argument("--reference", help="quality: ember fp32 logits (.npy)")
    return parser.parse_args(argv)


def emit(result):
    """The driver's result: one JSON object on the last line of stdout."""
    sys.stdout.write(json.dumps(result) + "\n")
    sys.stdout.flush()
