#!/usr/bin/env python3
"""Writes llama.cpp reference outputs ("goldens") for ember's model tests.

Run with the reference venv's python (tests/reference/setup_venv.sh prints its path):

    python tests/reference/make_model_goldens.py --model PATH --out tests/data/reference
    python tests/reference/make_model_goldens.py --model GEMMA.gguf --out tests/data/reference \
        --prefix gemma3 --bos --chat-template tests/data/tokenizer/templates/gemma3.jinja

Writes four files into --out (formats in tests/reference/README.md), PREFIX smollm2 by default:
  PREFIX_teacher_forced.json   top-32 logits and the full-vocabulary log-sum-exp at every
                               position of teacher_text.txt
  PREFIX_greedy.json           48-token greedy continuations of fixed prompts, argmax taken here
                               from llama.cpp's logits (no sampler), with the top-2 logit gaps
  PREFIX_f32_*.json            the same two, with llama.cpp running an F32 copy of the model's
                               weights (dequantized here with the gguf package)

--bos starts the teacher text and the raw prompts with the model's BOS token (Gemma expects
it); --chat-template renders the chat prompts with that file when the GGUF carries no
tokenizer.chat_template (Gemma 3's files do not).

Why two references: on the Q4_1 file llama.cpp quantizes every activation to 8 bits (Q8_1) before
its dot products, an approximation of its own; on the F32 copy it computes the same function as
ember's fp32 path (the same dequantized weights, FP32 activations), which makes it the reference
that tells ember's numerics apart from llama.cpp's.
"""
import argparse
import hashlib
import json
import os
import sys

import gguf
import jinja2
import llama_cpp
import numpy as np
from llama_cpp import Llama

TOP_K = 32
GREEDY_STEPS = 48
N_THREADS = 2
# The teacher text is ~1,460 tokens; the greedy prompts are short.
N_CTX = 2048

RAW_PROMPTS = [
    "Once upon a time, in a small village at the foot of the mountains,",
    "The old train station had been closed for years, but that night",
    "def fibonacci(n):\n    \"\"\"Return the n-th Fibonacci number.\"\"\"\n",
    "Here is a list of the planets in our solar system:\n1. Mercury\n2.",
    "Question: What is the boiling point of water at sea level?\nAnswer:",
    "The three primary colors are",
    "Photosynthesis is the process by which plants",
    "import numpy as np\n\n# Compute the mean of each row of a matrix\n",
    "Dear Mr. Alvarez,\n\nThank you for your letter of March 3rd. I am writing to",
    "Ingredients for a simple tomato soup:\n-",
    "In 1969, the Apollo 11 mission",
    "The quick brown fox",
]

SYSTEM_DEFAULT = None  # None: the template's own default system message is used.
CHAT_PROMPTS = [
    (SYSTEM_DEFAULT, "What is the capital of France?"),
    (SYSTEM_DEFAULT, "Write a short poem about the sea."),
    (SYSTEM_DEFAULT, "Explain what a CPU cache is in two sentences."),
    (SYSTEM_DEFAULT, "Give me three tips for learning a new language."),
    ("You are a concise assistant.", "How many days are there in a leap year?"),
    ("You are a helpful coding assistant.", "Write a Python function that reverses a string."),
    (SYSTEM_DEFAULT, "Translate 'good morning' into Spanish."),
    (SYSTEM_DEFAULT, "Tell me a fun fact about octopuses."),
    (SYSTEM_DEFAULT, "What should I pack for a weekend hiking trip?"),
    ("You are a friendly tutor for children.", "Why is the sky blue?"),
]


def sha256_of(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def render_chat(template_source, system, user, bos_token):
    """Renders one exchange with the GGUF's own chat template, as llama.cpp users would."""
    messages = ([{"role": "system", "content": system}] if system is not None else []) + [
        {"role": "user", "content": user}
    ]
    template = jinja2.Environment(loader=jinja2.BaseLoader()).from_string(template_source)
    return template.render(messages=messages, add_generation_prompt=True, bos_token=bos_token)


def logits_of_last(llm):
    return np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)


def log_sum_exp(row):
    row = row.astype(np.float64)
    peak = row.max()
    return float(peak + np.log(np.exp(row - peak).sum()))


def top_k(row, k):
    # Stable sort on -logit: equal logits keep ascending id order, so reruns are byte-identical.
    ids = np.argsort(-row, kind="stable")[:k]
    return ids


def teacher_forced(llm, text, bos):
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=bos, special=False)
    if len(tokens) > N_CTX:
        sys.exit(f"teacher text has {len(tokens)} tokens, more than n_ctx={N_CTX}")
    llm.reset()
    llm.eval(tokens)
    scores = np.array(llm.scores[: len(tokens)], dtype=np.float32)
    positions = []
    hits = 0
    for i in range(len(tokens) - 1):
        row = scores[i]
        ids = top_k(row, TOP_K)
        hits += int(ids[0] == tokens[i + 1])
        positions.append({
            "ids": [int(t) for t in ids],
            "logits": [round(float(row[t]), 4) for t in ids],
            "logsumexp": round(log_sum_exp(row), 4),
        })
    print(f"teacher-forced: {len(tokens)} tokens, {len(positions)} positions, "
          f"argmax == next token at {hits}/{len(positions)} = {hits / len(positions):.1%}")
    return tokens, positions


def greedy(llm, prompt_tokens):
    """Argmax decoding from the raw logits; EOS is not special here, so there are always 48."""
    llm.reset()
    llm.eval(prompt_tokens)
    continuation, gaps = [], []
    for _ in range(GREEDY_STEPS):
        row = logits_of_last(llm)
        best, second = top_k(row, 2)
        continuation.append(int(best))
        gaps.append(round(float(row[best] - row[second]), 4))
        llm.eval([int(best)])
    return continuation, gaps


def write_f32_copy(src, dst):
    """Copies a GGUF with every tensor dequantized to F32 and all metadata kept."""
    reader = gguf.GGUFReader(src)
    arch = reader.fields["general.architecture"].contents()
    writer = gguf.GGUFWriter(dst, arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # header fields the writer emits itself
        vtype = field.types[0]
        sub_type = field.types[-1] if vtype == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(name, field.contents(), vtype, sub_type)
    for t in reader.tensors:
        data = gguf.quants.dequantize(t.data, t.tensor_type).astype(np.float32)
        writer.add_tensor(t.name, data.reshape(tuple(reversed([int(d) for d in t.shape]))))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def write_goldens(model_path, out_dir, prefix, text, bos=False, chat_template=None):
    model_sha = sha256_of(model_path)
    llm = Llama(model_path, n_ctx=N_CTX, n_threads=N_THREADS, n_threads_batch=N_THREADS,
                logits_all=True, verbose=False)
    template = chat_template or llm.metadata["tokenizer.chat_template"]

    bos_text = llm.detokenize([llm.token_bos()], special=True).decode("utf-8")
    tokens, positions = teacher_forced(llm, text, bos)
    teacher = {
        "model": os.path.basename(model_path),
        "model_sha256": model_sha,
        "llama_cpp_python": llama_cpp.__version__,
        "n_ctx": N_CTX,
        "tokens": tokens,
        "top_k": TOP_K,
        "positions": positions,
    }

    cases = []
    prompts = [(p, False) for p in RAW_PROMPTS] + \
              [(render_chat(template, s, u, bos_text), True) for s, u in CHAT_PROMPTS]
    for prompt, special in prompts:
        # A chat template writes its own BOS where the model wants one.
        prompt_tokens = llm.tokenize(prompt.encode("utf-8"), add_bos=bos and not special, special=special)
        continuation, gaps = greedy(llm, prompt_tokens)
        cases.append({"prompt": prompt, "special": special, "prompt_tokens": prompt_tokens,
                      "continuation": continuation, "top2_gaps": gaps})
    greedy_doc = {"model": os.path.basename(model_path), "model_sha256": model_sha,
                  "llama_cpp_python": llama_cpp.__version__, "cases": cases}

    os.makedirs(out_dir, exist_ok=True)
    for name, doc in ((f"{prefix}_teacher_forced.json", teacher), (f"{prefix}_greedy.json", greedy_doc)):
        path = os.path.join(out_dir, name)
        with open(path, "w", encoding="utf-8") as f:
            json.dump(doc, f, separators=(",", ":"), ensure_ascii=False)
            f.write("\n")
        print(f"wrote {path} ({os.path.getsize(path)} bytes)")

    for case in (cases[0], cases[len(RAW_PROMPTS)]):
        text_out = llm.detokenize(case["continuation"], special=True).decode("utf-8", "replace")
        print(f"--- prompt: {case['prompt']!r}\n--- greedy: {text_out!r}")
    small = sum(g < 0.1 for c in cases for g in c["top2_gaps"])
    print(f"greedy: {len(cases)} cases, {small} steps with a top-2 gap < 0.1")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--out", required=True)
    parser.add_argument("--text", default=None,
                        help="teacher-forcing text (default: OUT/teacher_text.txt)")
    parser.add_argument("--f32-copy", default=None,
                        help="where to write the F32 copy of the model (default: beside --model)")
    parser.add_argument("--prefix", default="smollm2", help="names of the files written")
    parser.add_argument("--bos", action="store_true", help="start texts with the BOS token")
    parser.add_argument("--chat-template", default=None,
                        help="a Jinja chat template file, for a GGUF without tokenizer.chat_template")
    parser.add_argument("--skip-quantized", action="store_true",
                        help="only the F32 copy's goldens")
    args = parser.parse_args()

    text_path = args.text or os.path.join(args.out, "teacher_text.txt")
    with open(text_path, encoding="utf-8") as f:
        text = f.read()
    template = None
    if args.chat_template:
        with open(args.chat_template, encoding="utf-8") as f:
            template = f.read()
    if not args.skip_quantized:
        write_goldens(args.model, args.out, args.prefix, text, args.bos, template)
    f32_path = args.f32_copy or os.path.splitext(args.model)[0] + ".F32.gguf"
    if not os.path.exists(f32_path):
        write_f32_copy(args.model, f32_path)
    write_goldens(f32_path, args.out, args.prefix + "_f32", text, args.bos, template)


if __name__ == "__main__":
    main()
