"""ember's side of the suite: the command line of ember's own programs for each workload, and
their output turned into the record shape of the peer drivers (common.py).

The suite runs these programs directly (no Python in between), so peak memory and cold start
are ember's own:
  pp512, tg128     ember-bench --workload W --precision P --repeats 1 --no-bandwidth
  shared, chat     ember-bench --workload W --configs C (d: int8 + batching + prefix cache;
                   a: the plain fp32 one-at-a-time baseline without prefix cache)
  cold             ember-generate --max-tokens 1 [--weight-cache DIR]
  json             ember-bench --workload json --repeats 1 (JSON Schema constrained decoding)
  quality          ember-logits (the fp32 run writes the reference the others are compared to)
"""
import json
import os
import subprocess

import common


class Ember:
    def __init__(self, build_dir, model, threads):
        self.bench = os.path.join(build_dir, "benchmarks", "ember-bench")
        self.logits = os.path.join(build_dir, "benchmarks", "ember-logits")
        self.generate = os.path.join(build_dir, "examples", "generate", "ember-generate")
        self.model, self.threads = model, threads
        for program in (self.bench, self.logits, self.generate):
            if not os.access(program, os.X_OK):
                raise SystemExit(f"ember_driver: {program} is not built")

    def has_weight_cache(self):
        """Whether ember-generate takes --weight-cache (its --help, on stdout, lists every flag)."""
        usage = subprocess.run([self.generate, "--help"], capture_output=True, text=True).stdout
        return "--weight-cache" in usage

    def command(self, workload, precision, json_path, requests=32, turns=8, weight_cache=None):
        common_flags = ["--model", self.model, "--threads", str(self.threads)]
        if workload in ("pp512", "tg128"):
            return [self.bench, *common_flags, "--workload", workload, "--precision", precision,
                    "--repeats", "1", "--no-bandwidth", "--json", json_path]
        if workload in ("shared", "chat"):
            config = "d" if precision == "int8" else "a"
            return [self.bench, *common_flags, "--workload", workload, "--configs", config,
                    "--requests", str(requests), "--turns", str(turns), "--json", json_path]
        if workload == "json":
            return [self.bench, *common_flags, "--workload", "json", "--repeats", "1", "--json", json_path]
        if workload == "cold":
            cache = ["--weight-cache", weight_cache] if weight_cache else []
            return [self.generate, *common_flags, "--precision", precision, "--max-tokens", "1",
                    "--raw", "--prompt", "The lighthouse keeper wrote", *cache]
        raise ValueError(f"ember_driver: no command for workload {workload}")

    def quality_command(self, precision, out_npy, positions=0):
        return [self.logits, "--model", self.model, "--threads", str(self.threads),
                "--precision", precision, "--tokens", common.GOLDEN, "--out", out_npy,
                "--positions", str(positions)]


def parse(workload, json_path):
    """The record of one ember-bench run in the peers' shape."""
    if workload == "cold":
        return {}
    with open(json_path, encoding="utf-8") as f:
        result = json.load(f)
    if workload == "json":  # ember-bench's and json_bench_llamacpp.py's record alike
        tps = result["tokens_per_s"]
        record = {"compile_ms": result["compile_ms"]["mean"], "tokens_per_s_free": tps["batch1_free"],
                  "tokens_per_s_schema": tps["batch1_schema"], "schema_ratio": tps["batch1_schema"] / tps["batch1_free"]}
        if "paired_ratio" in result:  # ember-bench: the median of back-to-back pairs
            record["schema_ratio"] = result["paired_ratio"]["batch1"]
            record["streams16_ratio"] = result["paired_ratio"]["streams16"]
            record["mask_us_mean"] = result["mask_us"]["mean"]
            record["check_us_mean"] = result["check_us"]["mean"]
        return record
    result = result[0]
    if workload == "pp512":
        tps = result["tokens_per_s"]["median"]
        return {"prompt_tokens_per_s": tps, "ttft_ms": 1000 * common.PP_TOKENS / tps}
    if workload == "tg128":
        tps = result["tokens_per_s"]["median"]
        return {"generated_tokens_per_s": tps, "tpot_ms": 1000 / tps}
    keep = ("requests", "ttft_ms", "response_ms", "tpot_ms", "requests_per_s",
            "generated_tokens_per_s", "wall_s", "split_ms", "reused_prompt_fraction")
    return {key: result[key] for key in keep}
