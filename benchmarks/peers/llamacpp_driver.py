#!/usr/bin/env python3
"""llama.cpp (through llama-cpp-python's low-level C API) on one workload; one JSON line out.

    python benchmarks/peers/llamacpp_driver.py WORKLOAD --model FILE.gguf [--threads N] ...
    python benchmarks/peers/llamacpp_driver.py requantize SRC.gguf DST.gguf   (Q8_0 copy)

Workloads (shapes in common.py):
  pp512    one 512-token decode into an empty cache; tokens/s of that decode.
  tg128    a 16-token prompt, then 128 single-token decodes of the argmax; tokens/s of those.
  tg128x32 --requests (32) sequences at once, each its own 16-token prompt (all prompts in one
           batch), then decode steps of one token of every sequence until each has generated
           128; generated tokens/s over the wall time from the prompts on, as ember-bench's
           tg128x32 (one warm-up run first).
  shared   the requests share a 512-token prefix. As llama.cpp's own examples/parallel does, the
           prefix is decoded once on sequence 0 and copied to every other sequence with
           llama_memory_seq_cp (one unified KV cache), then all unique suffixes go in one batch
           and every decode step carries one token of each sequence. All requests are submitted
           at t0, before the prefix decode.
  chat     one context across the turns: each turn decodes only its new tokens (the previous
           reply's last token and the user message), as llama-cpp-python's Llama does when the
           new prompt extends the old one.
  cold     load, decode a 16-token prompt, pick the first token, exit (timed by the caller).
  quality  teacher-forced logits of the golden text against ember's fp32 logits (--reference).
Greedy (argmax) everywhere; end-of-sequence is ignored so every engine generates alike.
"""
import ctypes
import sys
import time

import llama_cpp
import numpy as np

import common


class Context:
    """One model and one context with a batch of up to `n_batch` tokens."""

    def __init__(self, path, threads, n_ctx, n_batch, n_seq_max=1):
        llama_cpp.llama_backend_init()
        self.model = llama_cpp.llama_model_load_from_file(path.encode(), llama_cpp.llama_model_default_params())
        if not self.model:
            sys.exit(f"llamacpp_driver: cannot load {path}")
        params = llama_cpp.llama_context_default_params()
        params.n_ctx, params.n_batch, params.n_ubatch = n_ctx, n_batch, min(n_batch, 512)
        params.n_seq_max, params.kv_unified = n_seq_max, True
        params.n_threads = params.n_threads_batch = threads
        self.ctx = llama_cpp.llama_init_from_model(self.model, params)
        self.n_vocab = llama_cpp.llama_vocab_n_tokens(llama_cpp.llama_model_get_vocab(self.model))
        self.n_batch = n_batch
        self.batch = llama_cpp.llama_batch_init(n_batch, 0, n_seq_max)

    def __del__(self):
        """Frees the batch, the context and the model: a process that runs several workloads or
        models (compare_sizes.py, tier_targets.py) would otherwise hold every one it loaded."""
        if getattr(self, "batch", None) is not None:
            llama_cpp.llama_batch_free(self.batch)
        if getattr(self, "ctx", None):
            llama_cpp.llama_free(self.ctx)
        if getattr(self, "model", None):
            llama_cpp.llama_model_free(self.model)

    def decode(self, entries):
        """entries: (token, position, seq_id, wants_logits) tuples, at most n_batch of them."""
        b = self.batch
        outside = max(token for token, _, _, _ in entries)
        if outside >= self.n_vocab:
            # The prompts are the default model's token ids (common.py); a file with a smaller
            # vocabulary, such as ember-make-synthetic's, takes compare_sizes.py's instead.
            sys.exit(f"llamacpp_driver: token id {outside} is outside this file's vocabulary of {self.n_vocab}; "
                     "the prompts are the default model's token ids: for synthetic files use "
                     "benchmarks/compare_sizes.py, which spreads its ids over the file's vocabulary")
        for i, (token, pos, seq, logits) in enumerate(entries):
            b.token[i], b.pos[i], b.n_seq_id[i], b.logits[i] = token, pos, 1, logits
            b.seq_id[i][0] = seq
        b.n_tokens = len(entries)
        if llama_cpp.llama_decode(self.ctx, b) != 0:
            sys.exit("llamacpp_driver: llama_decode failed")

    def decode_sequence(self, tokens, start, seq=0, all_logits=False):
        """Decodes `tokens` of one sequence from position `start`, in batches of n_batch."""
        for i in range(0, len(tokens), self.n_batch):
            chunk = tokens[i:i + self.n_batch]
            last = i + len(chunk) == len(tokens)
            self.decode([(t, start + i + j, seq, all_logits or (last and j == len(chunk) - 1))
                         for j, t in enumerate(chunk)])

    def logits(self, i):
        """The logits of batch row `i` of the last decode (-1: the last row with logits)."""
        row = llama_cpp.llama_get_logits_ith(self.ctx, i)
        return np.ctypeslib.as_array(row, shape=(self.n_vocab,))

    def argmax(self, i=-1):
        return int(np.argmax(self.logits(i)))


def run_pp(args):
    ctx = Context(args.model, args.threads, 1024, common.PP_TOKENS)
    prompt = common.text_tokens(common.PP_TOKENS)
    runs = []
    for _ in range(2):  # the first run warms up (pages in the weights, sizes the buffers)
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx.ctx), True)
        start = time.perf_counter()
        ctx.decode_sequence(prompt, 0)
        ctx.argmax()
        runs.append(time.perf_counter() - start)
    return {"prompt_tokens_per_s": common.PP_TOKENS / runs[-1], "ttft_ms": 1000 * runs[-1]}


def run_tg(args):
    ctx = Context(args.model, args.threads, 1024, common.PP_TOKENS)
    prompt = common.text_tokens(common.TG_PROMPT)
    elapsed = 0.0
    for warm_up in (True, False):
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx.ctx), True)
        ctx.decode_sequence(prompt, 0)
        start = time.perf_counter()
        for i in range(common.TG_TOKENS):
            ctx.decode([(ctx.argmax(), len(prompt) + i, 0, True)])
        elapsed = time.perf_counter() - start
    return {"generated_tokens_per_s": common.TG_TOKENS / elapsed, "tpot_ms": 1000 * elapsed / common.TG_TOKENS}


def run_streams(args):
    n = args.requests
    prompts = [common.text_tokens(common.TG_PROMPT, 700 + i * (common.TG_PROMPT + 1)) for i in range(n)]
    ctx = Context(args.model, args.threads, n * (common.TG_PROMPT + common.TG_TOKENS) + 64,
                  max(512, n * common.TG_PROMPT), n_seq_max=n)
    wall = 0.0
    for warm_up in (True, False):
        llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(ctx.ctx), True)
        t0 = time.perf_counter()
        ctx.decode([(t, j, seq, j == len(p) - 1) for seq, p in enumerate(prompts) for j, t in enumerate(p)])
        next_tokens = [ctx.argmax(seq * common.TG_PROMPT + common.TG_PROMPT - 1) for seq in range(n)]
        for step in range(common.TG_TOKENS - 1):
            ctx.decode([(t, common.TG_PROMPT + step, seq, True) for seq, t in enumerate(next_tokens)])
            next_tokens = [ctx.argmax(seq) for seq in range(n)]
        wall = time.perf_counter() - t0
    return {"generated_tokens_per_s": n * common.TG_TOKENS / wall, "streams": n}


def run_shared(args):
    n = args.requests
    prefix, suffixes = common.shared_prompts(n)
    gen = common.SHARED["generated_tokens"]
    n_ctx = len(prefix) + n * (len(suffixes[0]) + gen) + 64
    ctx = Context(args.model, args.threads, n_ctx, max(512, n * len(suffixes[0])), n_seq_max=n)
    t0 = time.perf_counter()
    ctx.decode_sequence(prefix, 0)
    memory = llama_cpp.llama_get_memory(ctx.ctx)
    for seq in range(1, n):
        llama_cpp.llama_memory_seq_cp(memory, 0, seq, -1, -1)
    entries = [(t, len(prefix) + j, seq, j == len(s) - 1) for seq, s in enumerate(suffixes) for j, t in enumerate(s)]
    ctx.decode(entries)
    rows = [seq * len(suffixes[0]) + len(suffixes[0]) - 1 for seq in range(n)]
    next_tokens = [ctx.argmax(r) for r in rows]
    ttft = [1000 * (time.perf_counter() - t0)] * n
    position = len(prefix) + len(suffixes[0])
    for step in range(gen - 1):
        ctx.decode([(t, position + step, seq, True) for seq, t in enumerate(next_tokens)])
        next_tokens = [ctx.argmax(seq) for seq in range(n)]
    wall = time.perf_counter() - t0
    return common.summarize_requests(ttft, [1000 * wall] * n, [gen] * n, wall)


def run_chat(args):
    shape = common.CHAT
    ctx = Context(args.model, args.threads, 2048, 512)
    pending = common.text_tokens(shape["system_tokens"], 0)  # tokens not yet in the KV cache
    position, ttft, response, generated = 0, [], [], []
    t_start = time.perf_counter()
    for turn in range(args.turns):
        t0 = time.perf_counter()
        pending += common.chat_user_turn(turn)
        ctx.decode_sequence(pending, position)
        position += len(pending)
        token = ctx.argmax()
        ttft.append(1000 * (time.perf_counter() - t0))
        for _ in range(shape["reply_tokens"] - 1):
            ctx.decode([(token, position, 0, True)])
            position += 1
            token = ctx.argmax()
        pending = [token]
        response.append(1000 * (time.perf_counter() - t0))
        generated.append(shape["reply_tokens"])
    return common.summarize_requests(ttft, response, generated, time.perf_counter() - t_start)


def run_cold(args):
    ctx = Context(args.model, args.threads, 512, 512)
    ctx.decode_sequence(common.text_tokens(common.TG_PROMPT), 0)
    return {"first_token": ctx.argmax()}


def run_quality(args):
    tokens = common.golden_tokens()
    if args.positions:
        tokens = tokens[:args.positions + 1]
    ctx = Context(args.model, args.threads, len(tokens) + 16, 512)
    rows = []
    for i in range(0, len(tokens) - 1, 512):
        chunk = tokens[i:min(i + 512, len(tokens) - 1)]
        ctx.decode([(t, i + j, 0, True) for j, t in enumerate(chunk)])
        rows.extend(np.array(ctx.logits(j)) for j in range(len(chunk)))
    return common.compare_logits(args.reference, np.stack(rows))


def requantize(src, dst):
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = llama_cpp.LLAMA_FTYPE_MOSTLY_Q8_0
    params.allow_requantize = True
    params.nthread = 2
    if llama_cpp.llama_model_quantize(src.encode(), dst.encode(), ctypes.byref(params)) != 0:
        sys.exit(f"llamacpp_driver: quantizing {src} to Q8_0 failed")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "requantize":
        requantize(sys.argv[2], sys.argv[3])
        return
    args = common.driver_args(__doc__.splitlines()[0])
    run = {"pp512": run_pp, "tg128": run_tg, "tg128x32": run_streams, "shared": run_shared, "chat": run_chat,
           "cold": run_cold, "quality": run_quality}[args.workload]
    common.emit(run(args))


if __name__ == "__main__":
    main()
