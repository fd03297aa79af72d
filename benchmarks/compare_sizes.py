#!/usr/bin/env python3
"""ember against llama.cpp at several model sizes: pp512 and tg128 on the same GGUF files.

    benchmarks/compare_sizes.py --build build --model 1b=/tmp/models/synth-1b.gguf \
        --model 8b=/tmp/models/synth-8b.gguf [--rounds 3] [--threads 2] [--json FILE] [--plot FILE]

The files are usually ember-make-synthetic's (random weights in the real shapes, Q4_0), so the
prompt is token ids spread over the vocabulary rather than text. Each round runs ember-bench
(int8, its default weight format: w4a8 on a 4-bit file) and then llama.cpp (llama-cpp-python from
tests/reference/setup_venv.sh, run with that venv's python) on one model before the next model;
rounds repeat the whole sequence, so machine drift hits both engines alike. Medians of the rounds.
--plot draws tokens/s against the files' parameter counts for both engines (matplotlib).
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))

import common  # noqa: E402
import llamacpp_driver  # noqa: E402


def synthetic_tokens(vocab):
    """Token ids for a model whose vocabulary is random: spread over it, away from the specials."""
    def tokens(count, offset=0):
        return [1000 + ((offset + i) * 7919) % (vocab - 1000) for i in range(count)]
    return tokens


def ember_bench_rows(build, model, threads, workloads, env=None, bandwidth=False):
    """ember-bench's JSON rows: one run of each workload, int8 (its default weight format: w4a8 on
    a 4-bit file); the bandwidth probe only when asked for (its share of the tg128 row)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "ember.json")
        command = [os.path.join(build, "benchmarks", "ember-bench"), "--model", model, "--precision", "int8",
                   "--workload", workloads, "--repeats", "1", "--threads", str(threads), "--json", out]
        if not bandwidth:
            command.append("--no-bandwidth")
        subprocess.run(command, check=True, stdout=subprocess.DEVNULL, env=env)
        with open(out, encoding="utf-8") as f:
            return json.load(f)


def ember_round(build, model, threads):
    rows = ember_bench_rows(build, model, threads, "pp512,tg128")
    return {r["workload"]: r["tokens_per_s"]["median"] for r in rows} | {"weight_format": rows[0].get("weight_format")}


def llamacpp_round(model, threads, token_ids=None, workloads=("pp512", "tg128")):
    """llama.cpp's tokens/s on each of `workloads` (pp512, tg128), run in this process.
    token_ids(count, offset) replaces the golden text's ids (common.text_tokens) for these runs:
    a file whose vocabulary is not the default model's needs synthetic_tokens'."""
    run = argparse.Namespace(model=model, threads=threads)
    drivers = {"pp512": (llamacpp_driver.run_pp, "prompt_tokens_per_s"),
               "tg128": (llamacpp_driver.run_tg, "generated_tokens_per_s")}
    golden = common.text_tokens
    common.text_tokens = token_ids or golden
    try:
        return {w: drivers[w][0](run)[drivers[w][1]] for w in workloads}
    finally:
        common.text_tokens = golden


def vocab_of(model):
    import gguf
    return len(gguf.GGUFReader(model).fields["tokenizer.ggml.tokens"].data)


def parameters_of(model):
    import gguf
    return sum(int(t.n_elements) for t in gguf.GGUFReader(model).tensors)


def plot(path, models, summary):
    """Two panels, pp512 and tg128: each engine's median tokens/s against the model's parameters."""
    import matplotlib
    import matplotlib.ticker
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = [parameters_of(p) / 1e9 for _, p in models]
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, workload in zip(axes, ("pp512", "tg128")):
        for engine, marker in (("ember", "o"), ("llama.cpp", "s")):
            ax.plot(sizes, [summary[name]["medians"][engine][workload] for name, _ in models], marker=marker,
                    label=engine)
        for (name, _), x in zip(models, sizes):
            ax.annotate(name, (x, summary[name]["medians"]["ember"][workload]), textcoords="offset points",
                        xytext=(4, 4), fontsize=8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_xlabel("parameters (billions)")
        ax.set_ylabel("tokens/s")
        ax.set_title(workload)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", action="append", required=True, help="NAME=PATH, repeatable")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json")
    parser.add_argument("--plot", help="PNG file for the tokens/s-against-size plot")
    args = parser.parse_args()
    models = [m.split("=", 1) for m in args.model]
    runs = {name: {"ember": [], "llama.cpp": []} for name, _ in models}
    for r in range(args.rounds):
        for name, path in models:
            print(f"round {r + 1}: {name} ember", file=sys.stderr, flush=True)
            runs[name]["ember"].append(ember_round(args.build, path, args.threads))
            print(f"round {r + 1}: {name} llama.cpp", file=sys.stderr, flush=True)
            runs[name]["llama.cpp"].append(llamacpp_round(path, args.threads, synthetic_tokens(vocab_of(path))))
    print("| model | ember weights | ember pp512 | llama.cpp pp512 | ratio | ember tg128 | llama.cpp tg128 | ratio |")
    print("|---|---|---|---|---|---|---|---|")
    summary = {}
    for name, _ in models:
        med = {engine: {w: statistics.median(run[w] for run in runs[name][engine]) for w in ("pp512", "tg128")}
               for engine in ("ember", "llama.cpp")}
        e, l = med["ember"], med["llama.cpp"]
        print(f"| {name} | {runs[name]['ember'][0]['weight_format']} | {e['pp512']:.1f} | {l['pp512']:.1f} | "
              f"{e['pp512'] / l['pp512']:.2f}x | {e['tg128']:.1f} | {l['tg128']:.1f} | {e['tg128'] / l['tg128']:.2f}x |")
        summary[name] = {"medians": med, "runs": runs[name]}
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"threads": args.threads, "rounds": args.rounds, "models": summary}, f, indent=2)
    if args.plot:
        plot(args.plot, models, summary)


if __name__ == "__main__":
    main()
