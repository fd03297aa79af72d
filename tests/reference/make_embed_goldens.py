#!/usr/bin/env python3
"""Embedding goldens from llama.cpp for all-MiniLM-L6-v2 (scripts/fetch-model.sh minilm).

Writes tests/data/reference/minilm_embeddings.json: for each of 200 sentences (the fixed list
below, then sentences built from word lists with a fixed seed), llama.cpp's token ids
(Llama.tokenize, add_bos=True: [CLS] ... [SEP]) and its L2-normalised mean-pooled embedding
(Llama(embedding=True).embed(text, normalize=True)) rounded to 7 significant digits. Also
--bench N: times llama.cpp embedding the same sentences (N repeats, batched as embed() batches
them) and prints one JSON line, for ember-bench --workload embed's comparison. --decoder PATH:
instead, tests/data/reference/smollm2_last_embeddings.json from a decoder (the default model,
SmolLM2) with last-token pooling over the first 24 sentences (llama.cpp's pooling_type LAST:
the final norm's output at the last token, normalised).
--rerank PATH: instead, tests/data/reference/bert_rerank_scores.json from a reranker (the file
`ember-make-synthetic bert-rerank` writes): llama.cpp's rank pooling (pooling_type 4:
llama_get_embeddings_seq, the classification head's outputs over the pair's first token) of each
(query, document) pair, the pair tokenized as llama-server's format_prompt_rerank builds it
without a rerank template ([BOS] query [EOS] [SEP] document [EOS], each where the vocabulary adds
it). Scores are kept to 9 significant digits.
Run with the reference venv:
    ~/.cache/ember/venv-ref/bin/python tests/reference/make_embed_goldens.py [--model PATH]
"""
import argparse
import json
import os
import random
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "data", "reference", "minilm_embeddings.json")
DEFAULT_MODEL = os.path.expanduser("~/.cache/ember/all-MiniLM-L6-v2.F16.gguf")

FIXED = [
    "The quick brown fox jumps over the lazy dog.",
    "A man is eating food.", "A man is eating a piece of bread.", "The stock market fell sharply today.",
    "Where did you leave the keys to the castle?", "The dragon sleeps beneath the mountain.",
    "I told you fifty turns ago that the bridge was out!", "Hello, world!", "hello world",
    "HELLO WORLD", "It's a beautiful day, isn't it? We'll see.", "Dr. Smith's patients weren't happy.",
    "Prices rose 3.5% in 2023, from $1,200 to $1,242.", "Call me at 555-0100 or e-mail a@b.com.",
    "Café, naïve, résumé, jalapeño and façade.", "Ångström units and Øresund bridge.",
    "東京は日本の首都です。", "北京欢迎你", "Москва — столица России.", "Ελληνικά γράμματα",
    "مرحبا بالعالم", "שלום עולם", "Emoji: 🙂🚀✨ are fun.", "Tabs\tand\nnewlines\r\nmixed in.",
    "   leading and trailing spaces   ", "multiple     spaces     inside", "C++ templates, std::vector<int>.",
    "def f(x): return x ** 2  # square", "The mitochondria is the powerhouse of the cell.",
    "unbelievably, antidisestablishmentarianism persisted", "e.g. i.e. etc. vs. a.m. p.m.",
    "[CLS] is not special here [SEP]", "Quotes: \"double\" and 'single' and «guillemets».",
    "Math: ∑ x² ≥ 0, ∀ x ∈ ℝ.", "Zero-width\u200bspace and soft\u00adhyphen.",
    "The NPC remembers that you stole the amulet.", "Search my notes for the meeting about budgets.",
    "What is the capital of France?", "Paris is the capital and largest city of France.",
    "How do I reset my password?",
]

SUBJECTS = ["The knight", "A small robot", "My neighbour", "The old wizard", "A curious child", "The merchant",
            "Our team", "The cat", "A lost traveller", "The scientist", "The captain", "An elderly farmer"]
VERBS = ["found", "lost", "repaired", "painted", "sold", "described", "forgot", "carried", "studied", "hid"]
OBJECTS = ["a golden key", "the broken lantern", "three silver coins", "an ancient map", "the red door",
           "a basket of apples", "the secret letter", "her favourite book", "the wooden shield", "a strange device",
           "the tallest tower", "a bottle of ink"]
PLACES = ["in the forest", "near the river", "at the market", "under the bridge", "before dawn",
          "after the storm", "in the library", "on the ship", "inside the cave", "during the festival"]


def sentences():
    rng = random.Random(43)
    out = list(FIXED)
    while len(out) < 200:
        s = f"{rng.choice(SUBJECTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(PLACES)}."
        if rng.random() < 0.3:
            s += f" It happened {rng.randint(2, 99)} days ago."
        if s not in out:
            out.append(s)
    return out


RERANK = [
    ("where is the dragon?", ["The dragon sleeps beneath the mountain.", "A man is eating a piece of bread.",
                              "the dragon", "Where did you leave the keys to the castle?", "DRAGON! dragon, dragon.",
                              "Paris is the capital and largest city of France."]),
    ("how to open the door", ["Find the keys, then open the door of the tower.", "the river is cold",
                              "doors and keys", "", "Café, naïve and 東京: unknown words."]),
    ("What is the capital of France?", ["Paris is the capital and largest city of France.", "The knight lost the map.",
                                        "capital", "It's 3.5 km to the city - or 42!"]),
]


def rerank_pair(llm, query, doc):
    """llama-server's format_prompt_rerank without a rerank template."""
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(llm._model.model)
    q = llm.tokenize(query.encode("utf-8"), add_bos=False, special=False)
    d = llm.tokenize(doc.encode("utf-8"), add_bos=False, special=False)
    eos = llama_cpp.llama_vocab_eos(vocab)
    if eos == -1:
        eos = llama_cpp.llama_vocab_sep(vocab)
    out = []
    if llama_cpp.llama_vocab_get_add_bos(vocab):
        out.append(llama_cpp.llama_vocab_bos(vocab))
    out += q
    if llama_cpp.llama_vocab_get_add_eos(vocab):
        out.append(eos)
    if llama_cpp.llama_vocab_get_add_sep(vocab):
        out.append(llama_cpp.llama_vocab_sep(vocab))
    out += d
    if llama_cpp.llama_vocab_get_add_eos(vocab):
        out.append(eos)
    return out


def rerank_golden(path, threads):
    import llama_cpp
    from llama_cpp import Llama
    llm = Llama(model_path=path, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_RANK, n_ctx=512,
                n_batch=512, n_ubatch=512, n_threads=threads, n_threads_batch=threads, verbose=False)
    n_out = llama_cpp.llama_model_n_cls_out(llm._model.model)
    cases = []
    for query, docs in RERANK:
        pairs = []
        for doc in docs:
            tokens = rerank_pair(llm, query, doc)
            llm._batch.reset()
            llm._batch.add_sequence(tokens, 0, True)
            llm._ctx.kv_cache_clear()
            llm._ctx.decode(llm._batch)
            ptr = llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, 0)
            pairs.append({"document": doc, "tokens": tokens, "scores": [float(f"{ptr[i]:.9g}") for i in range(n_out)]})
        cases.append({"query": query, "pairs": pairs})
    out = os.path.join(ROOT, "data", "reference", "bert_rerank_scores.json")
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"model": os.path.basename(path), "pooling": "rank", "outputs": n_out,
                   "llama_cpp_python": llama_cpp.__version__, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(f"wrote {out}: {sum(len(c['pairs']) for c in cases)} pairs")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default=os.environ.get("EMBER_MINILM_MODEL", DEFAULT_MODEL))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--bench", type=int, default=0, help="time N repeats instead of writing the golden")
    ap.add_argument("--decoder", help="a decoder GGUF: write its last-token golden instead")
    ap.add_argument("--rerank", help="a reranker GGUF (ember-make-synthetic bert-rerank): write its rank golden")
    args = ap.parse_args()
    if args.rerank:
        rerank_golden(args.rerank, args.threads)
        return
    import llama_cpp
    from llama_cpp import Llama

    if args.decoder:
        llm = Llama(model_path=args.decoder, embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_LAST,
                    n_ctx=512, n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
        cases = []
        for text in sentences()[:24]:
            ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
            emb = llm.embed(text, normalize=True)
            cases.append({"text": text, "tokens": ids, "embedding": [float(f"{v:.7g}") for v in emb]})
        out = os.path.join(ROOT, "data", "reference", "smollm2_last_embeddings.json")
        with open(out, "w", encoding="utf-8") as f:
            json.dump({"model": os.path.basename(args.decoder), "pooling": "last", "normalize": True,
                       "llama_cpp_python": llama_cpp.__version__, "cases": cases}, f, ensure_ascii=False)
            f.write("\n")
        print(f"wrote {out}: {len(cases)} sentences")
        return

    texts = sentences()
    llm = Llama(model_path=args.model, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512,
                n_threads=args.threads, n_threads_batch=args.threads, verbose=False)
    if args.bench:
        tokens = sum(len(llm.tokenize(t.encode("utf-8"), add_bos=True)) for t in texts)
        times = []
        for _ in range(args.bench):
            start = time.perf_counter()
            llm.embed(texts, normalize=True)
            times.append(time.perf_counter() - start)
        times.sort()
        median = times[len(times) // 2]
        print(json.dumps({"engine": "llama.cpp", "workload": "embed", "texts": len(texts), "tokens": tokens,
                          "threads": args.threads, "median_s": median, "tokens_per_s": tokens / median}))
        return
    cases = []
    for text in texts:
        ids = llm.tokenize(text.encode("utf-8"), add_bos=True, special=False)
        emb = llm.embed(text, normalize=True)
        cases.append({"text": text, "tokens": ids, "embedding": [float(f"{v:.7g}") for v in emb]})
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump({"model": os.path.basename(args.model), "pooling": "mean", "normalize": True,
                   "llama_cpp_python": __import__("llama_cpp").__version__, "cases": cases}, f, ensure_ascii=False)
        f.write("\n")
    print(f"wrote {OUT}: {len(cases)} sentences")


if __name__ == "__main__":
    main()
