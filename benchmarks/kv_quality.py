"""Teacher-forced quality of the int8 KV cache against the f16 one, with the tooling of the
peers' quality table (ember-logits, benchmarks/peers/common.py's compare_logits: top-1 agreement
and mean KL over the full vocabulary): for each weights precision, the golden text's logits with
an f16 and an int8 KV cache, and the int8 one compared against the f16 one; and each against
ember's fp32 path with an f32 cache (the quality table's reference).

  kv_quality.py BUILD_DIR [MODEL] [--positions N]   (needs numpy: ~/.cache/ember/venv-ref)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "peers"))
import common  # noqa: E402

import numpy as np  # noqa: E402


def logits(build, model, precision, kv, out, positions):
    subprocess.run([os.path.join(build, "benchmarks", "ember-logits"), "--model", model, "--threads", "2",
                    "--precision", precision, "--kv-type", kv, "--tokens", common.GOLDEN, "--out", out,
                    "--positions", str(positions)], check=True, stderr=subprocess.DEVNULL)
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("build")
    parser.add_argument("model", nargs="?", default=os.path.expanduser("~/.cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf"))
    parser.add_argument("--positions", type=int, default=0)
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = lambda p, kv: os.path.join(tmp, f"{p}-{kv}.npy")  # noqa: E731
        reference = logits(args.build, args.model, "fp32", "f32", path("fp32", "f32"), args.positions)
        for precision in ("fp32", "int8"):
            f16 = logits(args.build, args.model, precision, "f16", path(precision, "f16"), args.positions)
            int8 = logits(args.build, args.model, precision, "int8", path(precision, "int8"), args.positions)
            for kv, npy in (("f16", f16), ("int8", int8)):
                rows.append({"weights": precision, "kv": kv, "against": "fp32 weights, f32 KV",
                             **common.compare_logits(reference, np.load(npy))})
            rows.append({"weights": precision, "kv": "int8", "against": f"{precision} weights, f16 KV",
                         **common.compare_logits(f16, np.load(int8))})
    print("| weights | KV | against | positions | top-1 agreement | mean KL |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['weights']} | {r['kv']} | {r['against']} | {r['positions']} | "
              f"{100 * r['top1_agreement']:.1f} % | {r['mean_kl']:.5f} |")
    json.dump(rows, sys.stderr)


if __name__ == "__main__":
    main()
