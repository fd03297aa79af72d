#!/usr/bin/env python3
"""The benchmark suite: ember, llama.cpp and CTranslate2 on the same workloads, interleaved.

    python benchmarks/peers/suite.py --out DIR --build BUILD --model FILE.gguf
        [--threads 2] [--repeats 3] [--quick] [--engines LIST] [--workloads LIST]

Every (engine, workload) run is a fresh process; the runs go round by round, each round every
workload on every engine (A B A B ...), so slow drift of a shared machine hits all alike. Each
metric is the median over the rounds; peak resident memory (ru_maxrss of the process and its
children) the largest. The plain FP32 baseline's serving and chat runs take minutes and
run in the first round only. Quality (teacher-forced logits against ember fp32) runs once.
Writes DIR/results.json, then benchmarks/peers/report.py writes DIR/results.md and DIR/*.png.
"""
import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time

import common
import ember_driver
import report

PEERS = os.path.dirname(os.path.abspath(__file__))
SPEED_WORKLOADS = ("pp512", "tg128", "shared", "chat", "cold", "json")
JSON_BENCH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "json_bench_llamacpp.py")


class Engine:
    """One column of the results: a name, the workloads it runs and how to run them."""

    def __init__(self, name, workloads, command, parse, once=()):
        self.name, self.workloads, self.command, self.parse, self.once = name, workloads, command, parse, once


def peer_engine(name, driver, model, workloads, args):
    def command(workload, json_path):
        if workload == "json":  # llama.cpp's grammar sampling on ember-bench's JSON schemas
            return [sys.executable, JSON_BENCH, model, "--threads", str(args.threads), "--repeats", "1",
                    "--json", json_path]
        return [sys.executable, os.path.join(PEERS, driver), workload, "--model", model,
                "--threads", str(args.threads), "--requests", str(args.requests), "--turns", str(args.turns)]

    def parse(workload, stdout, json_path):
        if workload == "json":
            return ember_driver.parse("json", json_path)
        return json.loads(stdout.strip().splitlines()[-1]) if workload != "cold" else {}
    return Engine(name, workloads, command, parse)


def ember_engine(name, ember, precision, workloads, args, weight_cache=None, once=()):
    def command(workload, json_path):
        return ember.command(workload, precision, json_path, args.requests, args.turns, weight_cache)
    return Engine(name, workloads, command, lambda w, out, path: ember_driver.parse(w, path), once)


def run_process(argv, log):
    """(stdout, wall seconds, peak RSS in MB and CPU seconds of the process and its children)."""
    log.write(f"\n$ {' '.join(argv)}\n")
    log.flush()
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=log, text=True)
    stdout = proc.stdout.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    log.write(stdout)
    if proc.returncode != 0:
        raise SystemExit(f"suite: {argv[0]} failed with status {proc.returncode}; see the log")
    return stdout, wall, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime


def prepare_models(args, log):
    """Each engine's copy of the model: the GGUF itself, its Q8_0 requantization for llama.cpp,
    and the CTranslate2 conversion; made once and kept in the cache directory."""
    cache = args.cache
    os.makedirs(cache, exist_ok=True)
    stem = os.path.splitext(os.path.basename(args.model))[0]
    q8 = common.requantized_q8_path(cache, args.model)
    if not os.path.exists(q8):
        print(f"suite: requantizing to Q8_0 -> {q8}", flush=True)
        run_process([sys.executable, os.path.join(PEERS, "llamacpp_driver.py"), "requantize", args.model, q8 + ".tmp"], log)
        os.replace(q8 + ".tmp", q8)
    ct2 = os.path.join(cache, f"{stem}.ctranslate2")
    if not os.path.exists(os.path.join(ct2, "int8", "model.bin")):
        print(f"suite: converting to CTranslate2 -> {ct2}", flush=True)
        run_process([sys.executable, os.path.join(PEERS, "convert_ctranslate2.py"), "--gguf", args.model, "--out", ct2], log)
    return {"q8_0": q8, "ct2_int8": os.path.join(ct2, "int8"), "ct2_float32": os.path.join(ct2, "float32")}


def make_engines(args, ember, models):
    serving = ("pp512", "tg128", "shared", "chat", "cold")
    engines = [
        ember_engine("ember int8", ember, "int8", serving + ("json",), args),
        ember_engine("ember fp32 baseline", ember, "fp32", serving, args, once=("shared", "chat")),
        peer_engine("llama.cpp Q4_1", "llamacpp_driver.py", args.model, serving + ("json",), args),
        peer_engine("llama.cpp Q8_0", "llamacpp_driver.py", models["q8_0"], ("pp512", "tg128"), args),
        peer_engine("CTranslate2 int8", "ctranslate2_driver.py", models["ct2_int8"], serving, args),
    ]
    if ember.has_weight_cache():
        engines.insert(1, ember_engine("ember int8 + weight cache", ember, "int8", ("cold",), args,
                                       weight_cache=os.path.join(args.cache, "weight-cache")))
    else:
        print("suite: ember-generate has no --weight-cache flag; cold start without it only", flush=True)
    chosen = [e for e in engines if args.engines is None or any(k in e.name for k in args.engines)]
    return chosen


def warm_weight_cache(engines, args, log):
    """The packed-weight cache is written by the first start; the measured starts read it."""
    for engine in engines:
        if "weight cache" in engine.name and "cold" in args.workloads:
            run_process(engine.command("cold", None), log)


def run_rounds(engines, args, log):
    runs = {}  # (engine, workload) -> [{"record", "wall_s", "peak_rss_mb"}]
    for round_index in range(args.repeats):
        for workload in args.workloads:
            for engine in engines:
                if workload not in engine.workloads or (round_index > 0 and workload in engine.once):
                    continue
                print(f"round {round_index + 1}/{args.repeats}: {workload:6s} {engine.name}", flush=True)
                json_path = os.path.join(args.out, "raw", f"{engine.name}-{workload}-{round_index}.json".replace(" ", "_"))
                stdout, wall, rss, cpu = run_process(engine.command(workload, json_path), log)
                record = engine.parse(workload, stdout, json_path)
                runs.setdefault((engine.name, workload), []).append(
                    {"record": record, "wall_s": wall, "peak_rss_mb": rss, "cpu_s": cpu})
    return runs


def median_record(records):
    """The median of every numeric field across rounds (nested dicts field by field)."""
    first = records[0]
    if isinstance(first, dict):
        return {k: median_record([r[k] for r in records]) for k in first}
    if isinstance(first, (int, float)):
        return statistics.median(records)
    return first


def aggregate(runs):
    results = []
    for (engine, workload), rs in runs.items():
        metrics = median_record([r["record"] for r in rs])
        if workload == "cold":
            metrics["start_to_first_token_ms"] = 1000 * statistics.median(r["wall_s"] for r in rs)
        results.append({"engine": engine, "workload": workload, "rounds": len(rs), "metrics": metrics,
                        "peak_rss_mb": max(r["peak_rss_mb"] for r in rs),
                        "runs": [r["record"] for r in rs], "walls_s": [r["wall_s"] for r in rs],
                        "process_cpu_s": [r["cpu_s"] for r in rs]})
    return results


def run_quality(args, ember, models, log):
    """Top-1 agreement and KL of each engine's logits against ember's fp32 path."""
    reference = os.path.join(args.out, "raw", "ember-fp32-logits.npy")
    print("quality: ember fp32 reference logits", flush=True)
    run_process(ember.quality_command("fp32", reference, args.positions), log)
    rows = []
    int8_npy = os.path.join(args.out, "raw", "ember-int8-logits.npy")
    run_process(ember.quality_command("int8", int8_npy, args.positions), log)
    import numpy as np  # noqa: E402 (only the quality step needs it here)
    rows.append({"engine": "ember int8", **common.compare_logits(reference, np.load(int8_npy, mmap_mode="r"))})
    os.remove(int8_npy)
    peers = [("llama.cpp Q4_1", "llamacpp_driver.py", args.model),
             ("llama.cpp Q8_0", "llamacpp_driver.py", models["q8_0"]),
             ("CTranslate2 int8", "ctranslate2_driver.py", models["ct2_int8"]),
             ("CTranslate2 float32 (conversion check)", "ctranslate2_driver.py", models["ct2_float32"])]
    for name, driver, model in peers:
        print(f"quality: {name}", flush=True)
        stdout, *_ = run_process([sys.executable, os.path.join(PEERS, driver), "quality", "--model", model,
                                    "--threads", str(args.threads), "--positions", str(args.positions),
                                    "--reference", reference], log)
        rows.append({"engine": name, **json.loads(stdout.strip().splitlines()[-1])})
    os.remove(reference)
    return rows


def machine():
    def first_line(cmd):
        try:
            return subprocess.run(cmd, capture_output=True, text=True, shell=True).stdout.strip()
        except OSError:
            return ""
    return {"cpu": first_line("lscpu | sed -n 's/^Model name: *//p'"),
            "cpus_online": os.cpu_count(), "memory": first_line("free -g | awk '/Mem:/ {print $2 \" GiB\"}'"),
            "flags": first_line("grep -o -w -E 'avx2|avx512f|avx512_vnni|avx_vnni|amx_int8' /proc/cpuinfo | sort -u | tr '\\n' ' '"),
            "kernel": platform.release(), "python": platform.python_version()}


def versions():
    import ctranslate2
    import llama_cpp
    return {"llama_cpp_python": llama_cpp.__version__, "ctranslate2": ctranslate2.__version__}


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--build", required=True, help="ember's build directory")
    parser.add_argument("--model", required=True)
    parser.add_argument("--cache", default=os.path.join(os.environ.get("EMBER_CACHE_DIR", os.path.expanduser("~/.cache/ember")), "bench"))
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="smoke run: 1 round, 4 requests, 2 turns, 64 positions")
    parser.add_argument("--engines", help="comma-separated name fragments, e.g. 'ember,llama.cpp Q4_1'")
    parser.add_argument("--workloads", default=",".join(SPEED_WORKLOADS) + ",quality")
    args = parser.parse_args()
    args.engines = args.engines.split(",") if args.engines else None
    args.quality = "quality" in args.workloads.split(",")
    args.workloads = [w for w in args.workloads.split(",") if w in SPEED_WORKLOADS]
    args.requests, args.turns, args.positions = common.SHARED["requests"], common.CHAT["turns"], 0
    if args.quick:
        args.repeats, args.requests, args.turns, args.positions = 1, 4, 2, 64
    return args


def main():
    args = parse_args()
    os.makedirs(os.path.join(args.out, "raw"), exist_ok=True)
    started = time.time()
    load_before = os.getloadavg()
    with open(os.path.join(args.out, "suite.log"), "w", encoding="utf-8") as log:
        ember = ember_driver.Ember(args.build, args.model, args.threads)
        models = prepare_models(args, log)
        engines = make_engines(args, ember, models)
        warm_weight_cache(engines, args, log)
        results = aggregate(run_rounds(engines, args, log))
        quality = run_quality(args, ember, models, log) if args.quality else []
    doc = {"settings": {"threads": args.threads, "repeats": args.repeats, "quick": args.quick,
                        "requests": args.requests, "turns": args.turns, "model": args.model,
                        "shapes": {"shared": common.SHARED, "chat": common.CHAT}},
           "machine": {**machine(), "load_average_before": load_before, "load_average_after": os.getloadavg()},
           "versions": versions(), "duration_s": time.time() - started, "results": results, "quality": quality}
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
    report.write(doc, args.out)
    print(f"suite: done in {doc['duration_s']:.0f} s; {args.out}/results.md", flush=True)


if __name__ == "__main__":
    main()
