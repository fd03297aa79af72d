#!/usr/bin/env python3
"""ember-server against llama-cpp-python's OpenAI-compatible server, as users see them.

Both servers load the same GGUF with the same threads; the official `openai` async client plays
N concurrent users (default 1, 16, 64). Each user sends REQUESTS chat completions one after the
other, streaming: a shared system prompt of about 512 tokens plus its own question, 64 tokens
out, greedy. Reported per server and user count: mean, p50, p99 end-to-end time and time to the
first token, requests/s, failures (an explicit 429 counts apart: the request was refused, not
lost).

  python benchmarks/serve_bench.py --ember-server build/examples/server/ember-server \\
      --model ~/.cache/ember/SmolLM2-135M-Instruct.Q4_1.gguf --threads 2 \\
      --json bench.json --plot docs/serve_bench.png

Needs a Python with `openai` and `llama-cpp-python[server]` (tests/reference/setup_venv.sh's
venv plus `pip install 'llama-cpp-python[server]' openai matplotlib`).
"""
import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

SYSTEM_SENTENCES = [
    "You are the writing assistant of a small publishing house that prints travel guides.",
    "Answer in plain English, in short paragraphs, and never invent opening hours or prices.",
    "When a reader asks about a city, name one museum, one park and one market worth a visit.",
    "Prefer walking routes to taxis, and public transport to rental cars, unless asked otherwise.",
    "If a question is about safety, give the local emergency number before anything else.",
    "Keep every answer under two hundred words and end with one practical tip for the day.",
]

QUESTIONS = ["What should I see in {} in one afternoon?", "Where can I eat well and cheaply in {}?",
             "Which neighbourhood of {} is best for a first evening walk?", "How do I get around {} without a car?"]
CITIES = ["Lisbon", "Porto", "Seville", "Lyon", "Turin", "Ghent", "Krakow", "Ljubljana", "Bergen", "Tallinn",
          "Valencia", "Bologna", "Leipzig", "Graz", "Utrecht", "Aarhus"]


def system_prompt(target_words):
    words, out, k = 0, [], 0
    while words < target_words:
        s = SYSTEM_SENTENCES[k % len(SYSTEM_SENTENCES)] + f" (Guideline {k + 1}.)"
        out.append(s)
        words += len(s.split())
        k += 1
    return " ".join(out)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_up(url, proc, timeout=180):
    t = time.time()
    while time.time() - t < timeout:
        if proc.poll() is not None:
            sys.exit(f"the server exited with {proc.returncode}")
        try:
            with urllib.request.urlopen(url, timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.3)
    sys.exit(f"{url} did not answer within {timeout} s")


def start(kind, args, port):
    log = open(os.path.join(args.log_dir, f"{kind}.log"), "w")
    if kind == "ember":
        cmd = [args.ember_server, "--model", args.model, "--threads", str(args.threads), "--port", str(port)]
    else:
        cmd = [sys.executable, "-m", "llama_cpp.server", "--model", args.model, "--n_threads", str(args.threads),
               "--n_threads_batch", str(args.threads), "--n_ctx", "2048", "--port", str(port), "--host", "127.0.0.1",
               # Its default, True, cuts the stream in progress when a new request arrives: that
               # loses requests; queueing them is the fair comparison.
               "--interrupt_requests", "False"]
    proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
    wait_up(f"http://127.0.0.1:{port}/v1/models", proc)
    return proc


async def one_request(client, model, system, question, max_tokens):
    import openai
    t0 = time.perf_counter()
    ttft = None
    try:
        stream = await client.chat.completions.create(
            model=model, messages=[{"role": "system", "content": system}, {"role": "user", "content": question}],
            max_tokens=max_tokens, temperature=0, stream=True)
        async for chunk in stream:
            if ttft is None and chunk.choices and chunk.choices[0].delta.content:
                ttft = time.perf_counter() - t0
        if ttft is None:  # a stream that ended without text was cut, not served
            return {"ok": False, "refused": False, "error": "the stream ended without any text"}
        return {"ok": True, "e2e": time.perf_counter() - t0, "ttft": ttft}
    except openai.RateLimitError:
        return {"ok": False, "refused": True}
    except Exception as e:  # a lost request
        return {"ok": False, "refused": False, "error": repr(e)[:200]}


async def run_level(base_url, users, requests, system, max_tokens):
    import openai
    client = openai.AsyncOpenAI(base_url=base_url, api_key="none", max_retries=0, timeout=600)
    models = await client.models.list()
    model = models.data[0].id

    async def user(u):
        out = []
        for r in range(requests):
            q = QUESTIONS[(u + r) % len(QUESTIONS)].format(CITIES[(u * 7 + r) % len(CITIES)]) + f" (user {u})"
            out.append(await one_request(client, model, system, q, max_tokens))
        return out

    t = time.perf_counter()
    results = [r for rs in await asyncio.gather(*(user(u) for u in range(users))) for r in rs]
    wall = time.perf_counter() - t
    await client.close()
    return results, wall


def pct(values, p):
    v = sorted(values)
    if not v:
        return float("nan")
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def summarize(results, wall):
    ok = [r for r in results if r["ok"]]
    e2e = [r["e2e"] for r in ok]
    ttft = [r["ttft"] for r in ok if r["ttft"] == r["ttft"]]
    return {"requests": len(results), "completed": len(ok),
            "refused_429": sum(1 for r in results if not r["ok"] and r.get("refused")),
            "lost": sum(1 for r in results if not r["ok"] and not r.get("refused")),
            "errors": [r["error"] for r in results if not r["ok"] and not r.get("refused")][:3],
            "e2e_mean_s": statistics.mean(e2e) if e2e else float("nan"), "e2e_p50_s": pct(e2e, 50),
            "e2e_p99_s": pct(e2e, 99), "ttft_mean_s": statistics.mean(ttft) if ttft else float("nan"),
            "ttft_p50_s": pct(ttft, 50), "ttft_p99_s": pct(ttft, 99), "wall_s": wall,
            "requests_per_s": len(ok) / wall if wall > 0 else 0}


def plot(report, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for kind, rows in report["servers"].items():
        users = [int(u) for u in rows]
        axes[0].plot(users, [rows[u]["e2e_p99_s"] for u in rows], marker="o", label=f"{kind} p99")
        axes[0].plot(users, [rows[u]["e2e_p50_s"] for u in rows], marker=".", linestyle="--", label=f"{kind} p50")
        axes[1].plot(users, [rows[u]["ttft_p99_s"] for u in rows], marker="o", label=f"{kind} p99")
    for ax, title in zip(axes, ["end-to-end time (s)", "time to first token (s)"]):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("concurrent users")
        ax.set_title(title)
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle(f"{os.path.basename(report['model'])}, {report['threads']} threads, "
                 f"{report['system_prompt_tokens']}-token shared system prompt, {report['max_tokens']} tokens out")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ember-server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--users", default="1,16,64")
    ap.add_argument("--requests", type=int, default=1, help="requests per user at each level")
    ap.add_argument("--requests-single", type=int, default=4, help="requests of the single user")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--system-words", type=int, default=362, help="about 512 tokens with SmolLM2's tokenizer")
    ap.add_argument("--servers", default="ember,llama-cpp-python")
    ap.add_argument("--json")
    ap.add_argument("--plot")
    ap.add_argument("--log-dir", default="/tmp")
    args = ap.parse_args()

    system = system_prompt(args.system_words)
    report = {"model": args.model, "threads": args.threads, "max_tokens": args.max_tokens, "servers": {},
              "system_prompt_tokens": None, "cpus": os.cpu_count(), "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}
    for kind in args.servers.split(","):
        port = free_port()
        proc = start("ember" if kind == "ember" else "llama", args, port)
        try:
            base = f"http://127.0.0.1:{port}/v1"
            if report["system_prompt_tokens"] is None:  # the prompt's size as the model counts it
                body = json.dumps({"messages": [{"role": "system", "content": system}], "max_tokens": 1}).encode()
                req = urllib.request.Request(base + "/chat/completions", body, {"Content-Type": "application/json"})
                with urllib.request.urlopen(req, timeout=300) as r:
                    report["system_prompt_tokens"] = json.load(r)["usage"]["prompt_tokens"]
            rows = {}
            for users in [int(u) for u in args.users.split(",")]:
                n = args.requests_single if users == 1 else args.requests
                results, wall = asyncio.run(run_level(base, users, n, system, args.max_tokens))
                rows[str(users)] = summarize(results, wall)
                s = rows[str(users)]
                print(f"{kind:18s} users {users:3d}: e2e mean {s['e2e_mean_s']:.2f} p50 {s['e2e_p50_s']:.2f} "
                      f"p99 {s['e2e_p99_s']:.2f} s | ttft mean {s['ttft_mean_s']:.2f} p50 {s['ttft_p50_s']:.2f} "
                      f"p99 {s['ttft_p99_s']:.2f} s | {s['requests_per_s']:.2f} req/s | {s['completed']}/"
                      f"{s['requests']} done, {s['refused_429']} refused, {s['lost']} lost", flush=True)
            report["servers"][kind] = rows
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1)
    if args.plot:
        plot(report, args.plot)


if __name__ == "__main__":
    main()
