#!/usr/bin/env python3
"""Measures every speed target of one x86 tier (docs/benchmarks.md#x86-targets) on this machine,
ember against llama.cpp built for the tier, and says which are met.

    LLAMA_VENV/bin/python benchmarks/tier_targets.py [--tier avx2] [--rounds 3] [--threads 2]
        [--build build] [--model DEFAULT.gguf] [--model-1b SYNTHETIC_1B.gguf] [--json FILE]

Run it with the python of a llama-cpp-python venv built for the tier: llama.cpp runs in this
process, as in compare_sizes.py, and ember in its own under EMBER_CPU_ISA=TIER. On a CPU with
AVX2 and nothing above it, tests/reference/setup_venv.sh builds that venv as it is; on one with
more, name the flags it would derive there (the AVX2 ones here):

    CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_SSE42=ON -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON \
      -DGGML_F16C=ON -DGGML_BMI2=ON -DGGML_AVX_VNNI=OFF -DGGML_AVX512=OFF -DGGML_AVX512_VBMI=OFF \
      -DGGML_AVX512_VNNI=OFF -DGGML_AVX512_BF16=OFF -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF \
      -DGGML_AMX_BF16=OFF" tests/reference/setup_venv.sh ~/.cache/ember/venv-ref-avx2

Each round runs, in turn: ember on the default model (pp512, tg128, 32 streams), the demo's time
to first token, llama.cpp on the default file and on its Q8_0 requantization, ember and llama.cpp
on the 1B synthetic file (made with ember-make-synthetic when missing), then the frame budgets.
Ratios are taken within a round, so the machine's drift hits both engines alike; the report gives
each figure's median and range over the rounds. The 1B's share is its tg128 against the larger
of the bandwidth probe's two readings before the runs (ember-bench's "reached"), the stricter of
the two shares it prints. The report goes to stdout; llama.cpp's log and the progress to stderr.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "peers"))
import common  # noqa: E402
import compare_sizes  # noqa: E402
import llamacpp_driver  # noqa: E402

CACHE = os.environ.get("EMBER_CACHE_DIR", os.path.expanduser("~/.cache/ember"))
BUDGETS_MS = (16, 8, 4)


def ember_bench(args, model, workloads, bandwidth=False):
    """ember-bench at the tier: its JSON rows by workload (frames: by budget, in ms)."""
    rows = compare_sizes.ember_bench_rows(args.build, model, args.threads, workloads, args.env, bandwidth)
    return {r["budget_ms"] if r["workload"] == "frames" else r["workload"]: r for r in rows}


def demo_ttft_ms(args):
    """The demo's time to first token: ember-generate on its default prompt."""
    done = subprocess.run([os.path.join(args.build, "examples", "generate", "ember-generate"), "--model", args.model,
                           "--max-tokens", "8", "--threads", str(args.threads)],
                          check=True, capture_output=True, text=True, env=args.env)
    found = re.search(r"time to first token ([0-9.]+) ms", done.stderr)
    if not found:
        sys.exit(f"tier_targets: no time to first token in ember-generate's output:\n{done.stderr}")
    return float(found.group(1))


def one_round(args):
    """Every figure the targets need, from one pass over the engines."""
    ember = ember_bench(args, args.model, "pp512,tg128,tg128x32")
    figures = {f"ember {w}": ember[w]["tokens_per_s"]["median"] for w in ("pp512", "tg128", "tg128x32")}
    figures["ember ttft_ms"] = demo_ttft_ms(args)
    for name, path in (("Q4_1", args.model), ("Q8_0", args.model_q8)):
        for w, value in compare_sizes.llamacpp_round(path, args.threads).items():
            figures[f"llama.cpp {name} {w}"] = value
    big = ember_bench(args, args.model_1b, "pp512,tg128", bandwidth=True)
    figures["ember 1b pp512"] = big["pp512"]["tokens_per_s"]["median"]
    figures["ember 1b bandwidth share"] = big["tg128"]["fraction_of_ceiling"]
    token_ids = compare_sizes.synthetic_tokens(compare_sizes.vocab_of(args.model_1b))
    figures["llama.cpp 1b pp512"] = compare_sizes.llamacpp_round(args.model_1b, args.threads, token_ids,
                                                                 ("pp512",))["pp512"]
    frames = ember_bench(args, args.model, "frames")
    for budget in BUDGETS_MS:
        figures[f"ember frames p99 {budget} ms"] = frames[float(budget)]["step_ms"]["p99"]
    return figures


def targets():
    """(target, its figure from a round's figures, the bound, whether larger is better)."""
    listed = [
        ("tg128 vs llama.cpp Q4_1", lambda f: f["ember tg128"] / f["llama.cpp Q4_1 tg128"], 2.5, True),
        ("tg128 vs llama.cpp Q8_0", lambda f: f["ember tg128"] / f["llama.cpp Q8_0 tg128"], 2.0, True),
        ("pp512 vs llama.cpp's faster of Q4_1 and Q8_0",
         lambda f: f["ember pp512"] / max(f["llama.cpp Q4_1 pp512"], f["llama.cpp Q8_0 pp512"]), 1.5, True),
        ("the demo's time to first token, ms", lambda f: f["ember ttft_ms"], 150.0, False),
        ("1B decode's share of the bandwidth probe", lambda f: f["ember 1b bandwidth share"], 0.85, True),
        ("1B pp512 vs llama.cpp Q4_0", lambda f: f["ember 1b pp512"] / f["llama.cpp 1b pp512"], 1.5, True),
        ("32 streams, tokens/s", lambda f: f["ember tg128x32"], 800.0, True),
    ]
    for budget in BUDGETS_MS:
        listed.append((f"frames: p99 step() at a {budget} ms budget, ms",
                       lambda f, b=budget: f[f"ember frames p99 {b} ms"], budget + 2.0, False))
    return listed


def figure_text(value):
    return f"{value:.0f}" if abs(value) >= 100 else f"{value:.3g}"


def report(args, rounds):
    flags = "(not recorded)\n"
    flags_file = os.path.join(sys.prefix, "llama-build-flags.txt")  # tests/reference/setup_venv.sh's
    if os.path.exists(flags_file):
        with open(flags_file, encoding="utf-8") as f:
            flags = f.read()
    print(f"ember at EMBER_CPU_ISA={args.tier}, {args.threads} threads, rounds: {len(rounds)}; "
          f"llama.cpp from {sys.prefix}:\n{flags}")
    print("| target | median [min, max] | bound | met |")
    print("|---|---|---|---|")
    verdicts = {}
    for name, figure, bound, larger in targets():
        values = [figure(f) for f in rounds]
        median = statistics.median(values)
        met = median >= bound if larger else median <= bound
        verdicts[name] = {"values": values, "median": median, "bound": bound, "met": met}
        print(f"| {name} | {figure_text(median)} [{figure_text(min(values))}, {figure_text(max(values))}] | "
              f"{'>=' if larger else '<='} {bound:g} | {'yes' if met else 'no'} |")
    print("\nPer round:")
    for key in rounds[0]:
        print(f"  {key}: " + ", ".join(f"{f[key]:.4g}" for f in rounds))
    return verdicts


def prepare_models(args):
    """Makes the Q8_0 requantization and the 1B file where missing, kept in the cache directory;
    returns the Q8_0 file's path."""
    bench = os.path.join(CACHE, "bench")
    os.makedirs(bench, exist_ok=True)
    q8 = common.requantized_q8_path(bench, args.model)  # the one benchmarks/peers/suite.py makes
    if not os.path.exists(q8):
        print(f"tier_targets: requantizing to Q8_0 -> {q8}", file=sys.stderr, flush=True)
        llamacpp_driver.requantize(args.model, q8 + ".tmp")
        os.replace(q8 + ".tmp", q8)
    if not os.path.exists(args.model_1b):
        print(f"tier_targets: writing the 1B synthetic file -> {args.model_1b}", file=sys.stderr, flush=True)
        subprocess.run([os.path.join(args.build, "benchmarks", "ember-make-synthetic"), "1b", args.model_1b + ".tmp",
                        args.model_1b + ".json", "--type", "q4_0"], check=True, stdout=subprocess.DEVNULL)
        os.replace(args.model_1b + ".tmp", args.model_1b)
    return q8


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tier", default="avx2", help="EMBER_CPU_ISA for ember (default: avx2)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--build", default="build")
    parser.add_argument("--model", default=os.path.join(CACHE, "SmolLM2-135M-Instruct.Q4_1.gguf"),
                        help="the default model (scripts/fetch-model.sh caches it)")
    parser.add_argument("--model-1b", default=os.path.join(CACHE, "synthetic-1b.Q4_0.gguf"))
    parser.add_argument("--json", help="also write every round's figures and the verdicts here")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    for program in ("benchmarks/ember-bench", "benchmarks/ember-make-synthetic", "examples/generate/ember-generate"):
        if not os.access(os.path.join(args.build, program), os.X_OK):
            parser.error(f"{args.build}/{program} is missing: build ember first (cmake --build {args.build})")
    if not os.path.exists(args.model):
        parser.error(f"{args.model} is missing: scripts/fetch-model.sh fetches it")
    args.env = dict(os.environ, EMBER_CPU_ISA=args.tier)
    args.model_q8 = prepare_models(args)
    rounds = []
    for r in range(args.rounds):
        print(f"tier_targets: round {r + 1} of {args.rounds}", file=sys.stderr, flush=True)
        rounds.append(one_round(args))
    verdicts = report(args, rounds)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"tier": args.tier, "threads": args.threads, "llama_cpp": sys.prefix, "rounds": rounds,
                       "targets": verdicts}, f, indent=2)


if __name__ == "__main__":
    main()
