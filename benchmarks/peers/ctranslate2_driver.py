#!/usr/bin/env python3
"""CTranslate2 on one workload; one JSON line out.

    python benchmarks/peers/ctranslate2_driver.py WORKLOAD --model DIR [--threads N] ...

DIR is a model written by convert_ctranslate2.py; it runs with compute_type int8 when its
weights are INT8 (DIR/int8), else float32. Workloads (shapes in common.py):
  pp512    generate_batch of the 512-token prompt with max_length 1: tokens/s of that call.
  tg128    129 tokens after a 16-token prompt, timed from the first generated token to the
           last through the step callback: tokens/s of the 128 after the first.
  shared   one generate_batch call with every request: the common prefix as static_prompt
           (CTranslate2 computes it once and caches its state, what its users would do), the
           unique suffixes as the batch. TTFT per request from the step callback.
  chat     each turn a generate_batch of the whole conversation so far: CTranslate2 keeps no
           KV cache between calls (its prompt cache takes a fixed static prompt only).
  cold     load and generate one token of a 16-token prompt (timed by the caller).
  quality  forward_batch logits of the golden text against ember's fp32 logits (--reference).
Greedy everywhere; min_length = max_length so that end-of-sequence never ends a request early.
"""
import json
import os
import time

import ctranslate2
import numpy as np

import common


class Model:
    def __init__(self, path, threads):
        with open(os.path.join(path, "vocabulary.json"), encoding="utf-8") as f:
            self.vocabulary = json.load(f)
        compute_type = "int8" if os.path.basename(os.path.normpath(path)) == "int8" else "float32"
        self.generator = ctranslate2.Generator(path, device="cpu", compute_type=compute_type,
                                               intra_threads=threads, inter_threads=1)

    def strings(self, ids):
        return [self.vocabulary[i] for i in ids]

    def generate(self, prompts, length, static_prompt=None, callback=None):
        """Greedy: exactly `length` new tokens for each of `prompts` (lists of token ids)."""
        return self.generator.generate_batch(
            [self.strings(p) for p in prompts], max_length=length, min_length=length,
            static_prompt=self.strings(static_prompt) if static_prompt else None,
            include_prompt_in_result=False, sampling_topk=1, callback=callback)


class StepClock:
    """Records, per batch entry, when its first and its last step result arrived."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.first, self.last = {}, {}

    def __call__(self, step):
        now = time.perf_counter()
        self.first.setdefault(step.batch_id, now)
        self.last[step.batch_id] = now
        return False  # False: keep generating

    def ms(self, table):
        return [1000 * (table[i] - self.t0) for i in sorted(table)]


def run_pp(args):
    model = Model(args.model, args.threads)
    prompt = common.text_tokens(common.PP_TOKENS)
    for _ in range(2):  # the first call warms up
        start = time.perf_counter()
        model.generate([prompt], 1)
        elapsed = time.perf_counter() - start
    return {"prompt_tokens_per_s": common.PP_TOKENS / elapsed, "ttft_ms": 1000 * elapsed}


def run_tg(args):
    model = Model(args.model, args.threads)
    prompt = common.text_tokens(common.TG_PROMPT)
    for _ in range(2):
        clock = StepClock()
        model.generate([prompt], common.TG_TOKENS + 1, callback=clock)
    elapsed = clock.last[0] - clock.first[0]
    return {"generated_tokens_per_s": common.TG_TOKENS / elapsed, "tpot_ms": 1000 * elapsed / common.TG_TOKENS}


def run_shared(args):
    model = Model(args.model, args.threads)
    prefix, suffixes = common.shared_prompts(args.requests)
    model.generate([common.text_tokens(16, 1000)], 2)  # warm-up on other tokens: no prefix state
    gen = common.SHARED["generated_tokens"]
    clock = StepClock()
    results = model.generate(suffixes, gen, static_prompt=prefix, callback=clock)
    wall = time.perf_counter() - clock.t0
    generated = [len(r.sequences_ids[0]) for r in results]
    return common.summarize_requests(clock.ms(clock.first), clock.ms(clock.last), generated, wall)


def run_chat(args):
    shape = common.CHAT
    model = Model(args.model, args.threads)
    conversation = common.text_tokens(shape["system_tokens"], 0)
    ttft, response, generated = [], [], []
    t_start = time.perf_counter()
    for turn in range(args.turns):
        conversation += common.chat_user_turn(turn)
        clock = StepClock()
        reply = model.generate([conversation], shape["reply_tokens"], callback=clock)[0].sequences_ids[0]
        ttft += clock.ms(clock.first)
        response.append(1000 * (time.perf_counter() - clock.t0))
        generated.append(len(reply))
        conversation += reply
    return common.summarize_requests(ttft, response, generated, time.perf_counter() - t_start)


def run_cold(args):
    model = Model(args.model, args.threads)
    return {"first_token": model.generate([common.text_tokens(common.TG_PROMPT)], 1)[0].sequences_ids[0][0]}


def run_quality(args):
    tokens = common.golden_tokens()
    if args.positions:
        tokens = tokens[:args.positions + 1]
    model = Model(args.model, args.threads)
    logits = np.array(model.generator.forward_batch([tokens[:-1]]))[0]
    return common.compare_logits(args.reference, logits)


def main():
    args = common.driver_args(__doc__.splitlines()[0])
    run = {"pp512": run_pp, "tg128": run_tg, "shared": run_shared, "chat": run_chat,
           "cold": run_cold, "quality": run_quality}[args.workload]
    common.emit(run(args))


if __name__ == "__main__":
    main()
