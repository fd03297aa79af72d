#!/usr/bin/env python3
"""Turns the suite's results.json into results.md (tables) and PNG plots.

    python benchmarks/peers/report.py DIR      (reads DIR/results.json; suite.py calls write())

The tables answer, per workload: how much faster is ember's response than the plain FP32
one-at-a-time engine (ember fp32 baseline), than llama.cpp and than CTranslate2.
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ENGINE_ORDER = ["ember int8", "ember int8 + weight cache", "ember fp32 baseline", "llama.cpp Q4_1",
                "llama.cpp Q8_0", "CTranslate2 int8"]
PEERS = ["ember fp32 baseline", "llama.cpp Q4_1", "llama.cpp Q8_0", "CTranslate2 int8"]

# (workload, metric path, label, higher is better); the first row of each workload is its headline.
ROWS = [
    ("pp512", "prompt_tokens_per_s", "prompt processing, 512 tokens: tokens/s", True),
    ("pp512", "ttft_ms", "  time to first token, ms", False),
    ("tg128", "generated_tokens_per_s", "generation, 128 tokens: tokens/s", True),
    ("tg128", "tpot_ms", "  time per output token, ms", False),
    ("shared", "response_ms.mean", "shared prompt, {requests} requests: mean response, ms", False),
    ("shared", "response_ms.p50", "  response p50, ms", False),
    ("shared", "response_ms.p99", "  response p99, ms", False),
    ("shared", "ttft_ms.mean", "  TTFT mean, ms", False),
    ("shared", "ttft_ms.p99", "  TTFT p99, ms", False),
    ("shared", "tpot_ms", "  TPOT, ms", False),
    ("shared", "requests_per_s", "  requests/s", True),
    ("shared", "generated_tokens_per_s", "  generated tokens/s", True),
    ("chat", "response_ms.mean", "chat, {turns} turns: mean turn response, ms", False),
    ("chat", "ttft_ms.mean", "  TTFT mean, ms", False),
    ("chat", "ttft_ms.p99", "  TTFT p99, ms", False),
    ("chat", "tpot_ms", "  TPOT, ms", False),
    ("chat", "wall_s", "  whole session, s", False),
    ("cold", "start_to_first_token_ms", "cold start: process start to first token, ms", False),
    # ember's batch-1 rate is decode only, llama-cpp-python's whole completions: compare the ratios.
    ("json", "schema_ratio", "JSON Schema, batch 1: constrained / free decode rate", True),
    ("json", "streams16_ratio", "  16 streams: constrained / free", True),
    ("json", "compile_ms", "  schema compile, ms", False),
    ("json", "mask_us_mean", "  full mask per token, us", False),
    ("json", "check_us_mean", "  sampler step asking about its pick, us", False),
]
HEADLINES = {"pp512": "prompt_tokens_per_s", "tg128": "generated_tokens_per_s", "shared": "response_ms.mean",
             "chat": "response_ms.mean", "cold": "start_to_first_token_ms", "json": "schema_ratio"}


def lookup(metrics, path):
    for key in path.split("."):
        if not isinstance(metrics, dict) or key not in metrics:
            return None
        metrics = metrics[key]
    return metrics


def table_of(doc):
    """{(engine, workload): result} and the engines present, in display order."""
    by_key = {(r["engine"], r["workload"]): r for r in doc["results"]}
    engines = [e for e in ENGINE_ORDER if any(k[0] == e for k in by_key)]
    return by_key, engines


def fmt(value):
    if value is None:
        return "–"
    return f"{value:,.0f}" if abs(value) >= 100 else f"{value:,.1f}" if abs(value) >= 10 else f"{value:,.2f}"


def best_ember(by_key, workload, path, higher):
    values = [lookup(by_key[(e, workload)]["metrics"], path) for e in ("ember int8", "ember int8 + weight cache")
              if (e, workload) in by_key]
    values = [v for v in values if v is not None]
    return (max(values) if higher else min(values)) if values else None


def speedup(ember, other, higher):
    if ember is None or other is None or ember == 0 or other == 0:
        return None
    return ember / other if higher else other / ember


def main_table(doc):
    by_key, engines = table_of(doc)
    peers = [p for p in PEERS if p in engines]
    columns = engines + [f"ember vs {p}" for p in peers]
    lines = ["| workload / metric | " + " | ".join(columns) + " |",
             "|---" * (1 + len(engines) + len(peers)) + "|"]
    for workload, path, label, higher in ROWS:
        if not any((e, workload) in by_key for e in engines):
            continue
        cells = [fmt(lookup(by_key[(e, workload)]["metrics"], path)) if (e, workload) in by_key else "–" for e in engines]
        ember = best_ember(by_key, workload, path, higher)
        ratios = []
        for p in peers:
            other = lookup(by_key[(p, workload)]["metrics"], path) if (p, workload) in by_key else None
            r = speedup(ember, other, higher)
            ratios.append("–" if r is None else f"{r:.2f}x")
        label = label.format(requests=doc["settings"]["requests"], turns=doc["settings"]["turns"])
        lines.append(f"| {label} | " + " | ".join(cells + ratios) + " |")
    return "\n".join(lines)


def per_process_table(doc, title, value):
    """Engines x workloads of value(result), a per-process figure."""
    by_key, engines = table_of(doc)
    workloads = [w for w in HEADLINES if any((e, w) in by_key for e in engines)]
    lines = [f"| {title} | " + " | ".join(workloads) + " |", "|---" * (1 + len(workloads)) + "|"]
    for e in engines:
        cells = [fmt(value(by_key[(e, w)])) if (e, w) in by_key else "–" for w in workloads]
        lines.append(f"| {e} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def busy_cores(result):
    """CPU seconds over wall seconds of the engine's processes: the cores it kept busy."""
    pairs = list(zip(result.get("process_cpu_s", []), result["walls_s"]))
    return sum(c for c, _ in pairs) / sum(w for _, w in pairs) if pairs else None


def split_table(doc):
    lines = ["| ember, mean per request, ms | queue | prefill | decode | response | prompt reused |",
             "|---|---|---|---|---|---|"]
    for r in doc["results"]:
        split = r["metrics"].get("split_ms")
        if split:
            lines.append(f"| {r['engine']}, {r['workload']} | {fmt(split['queue'])} | {fmt(split['prefill'])} | "
                         f"{fmt(split['decode'])} | {fmt(split['response'])} | "
                         f"{100 * r['metrics'].get('reused_prompt_fraction', 0):.0f} % |")
    return "\n".join(lines)


def quality_table(doc):
    lines = ["| engine (against ember fp32) | positions | top-1 agreement | mean KL |", "|---|---|---|---|"]
    for q in doc["quality"]:
        lines.append(f"| {q['engine']} | {q['positions']} | {100 * q['top1_agreement']:.1f} % | {q['mean_kl']:.4f} |")
    return "\n".join(lines)


def plot_headlines(doc, path):
    by_key, engines = table_of(doc)
    workloads = [w for w in HEADLINES if any((e, w) in by_key for e in engines)]
    fig, axes = plt.subplots(1, len(workloads), figsize=(3.2 * len(workloads), 3.4), squeeze=False)
    for ax, w in zip(axes[0], workloads):
        names = [e for e in engines if (e, w) in by_key]
        values = [lookup(by_key[(e, w)]["metrics"], HEADLINES[w]) or 0 for e in names]
        ax.bar(range(len(names)), values, color=["#c0392b" if n.startswith("ember int8") else "#7f8c8d" for n in names])
        ax.set_xticks(range(len(names)), [n.replace(" ", "\n", 1) for n in names], fontsize=6, rotation=90)
        unit = "tokens/s (higher is better)" if HEADLINES[w].endswith("per_s") else "ms (lower is better)"
        ax.set_title(w, fontsize=9)
        ax.set_ylabel(unit, fontsize=7)
        ax.tick_params(axis="y", labelsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)


def plot_serving(doc, path):
    """Latency per request of the shared and chat workloads; False when neither ran."""
    by_key, engines = table_of(doc)
    if not any((e, w) in by_key for e in engines for w in ("shared", "chat")):
        return False
    metrics = [("ttft_ms.mean", "TTFT mean"), ("ttft_ms.p99", "TTFT p99"), ("response_ms.mean", "response mean"),
               ("response_ms.p99", "response p99")]
    fig, axes = plt.subplots(1, 2, figsize=(9, 3.4))
    for ax, w in zip(axes, ("shared", "chat")):
        names = [e for e in engines if (e, w) in by_key]
        width = 0.8 / max(1, len(names))
        for i, e in enumerate(names):
            values = [(lookup(by_key[(e, w)]["metrics"], m) or 0) / 1000 for m, _ in metrics]
            ax.bar([x + i * width for x in range(len(metrics))], values, width, label=e)
        ax.set_xticks([x + 0.4 - width / 2 for x in range(len(metrics))], [label for _, label in metrics], fontsize=7)
        ax.set_yscale("log")
        ax.set_ylabel("seconds (log scale)", fontsize=7)
        ax.set_title(f"{w}: latency per request", fontsize=9)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=len(labels), fontsize=7)
    fig.tight_layout(rect=(0, 0.08, 1, 1))
    fig.savefig(path, dpi=80)
    plt.close(fig)
    return True


def write(doc, out_dir):
    plot_headlines(doc, os.path.join(out_dir, "headlines.png"))
    serving = plot_serving(doc, os.path.join(out_dir, "serving.png"))
    m, s = doc["machine"], doc["settings"]
    text = [f"# Benchmark results{' (quick smoke run)' if s['quick'] else ''}", "",
            f"Machine: {m['cpu']}, {m['cpus_online']} CPUs online, {m['memory']}, {m['flags']}; "
            f"load average {m['load_average_before'][0]:.1f} before, {m['load_average_after'][0]:.1f} after. "
            f"{s['threads']} threads per engine, median of {s['repeats']} interleaved rounds "
            f"(the fp32 baseline's shared and chat runs: 1 round). Versions: "
            + ", ".join(f"{k} {v}" for k, v in doc["versions"].items()) + f". Suite time {doc['duration_s']:.0f} s.",
            "", "## Speed (ratios: > 1 means ember is faster)", "", main_table(doc), "",
            "## ember's response time split", "", split_table(doc), "",
            "## Peak resident memory", "", per_process_table(doc, "peak RSS, MB", lambda r: r["peak_rss_mb"]), "",
            "Cores kept busy (process CPU time / wall time; 2 threads each, so at most about 2):", "",
            per_process_table(doc, "busy cores", busy_cores), ""]
    if doc["quality"]:
        text += ["## Quality: teacher-forced on the golden text, against ember's fp32 path", "", quality_table(doc), ""]
    text += ["![headline metrics](headlines.png)", ""]
    if serving:
        text += ["![serving latency](serving.png)", ""]
    with open(os.path.join(out_dir, "results.md"), "w", encoding="utf-8") as f:
        f.write("\n".join(text))


if __name__ == "__main__":
    with open(os.path.join(sys.argv[1], "results.json"), encoding="utf-8") as f:
        write(json.load(f), sys.argv[1])
