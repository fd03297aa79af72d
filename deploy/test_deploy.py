#!/usr/bin/env python3
"""deploy/haproxy.cfg on loopback: 2 ember-server replicas behind HAProxy.

  test_deploy.py EMBER_SERVER MODEL

Sends 3 system prompts x 6 questions through the balancer, first with the prefix-aware config
(fresh replicas), then with the same config switched to round robin (fresh replicas again), and
reads the prefix-cache hit ratio (cached prompt tokens / prompt tokens) summed over the
replicas' /metrics. Prefix-aware routing must reuse more. Then one replica is killed: the health
check and redispatch keep every request answered. Exits 77 (skip) without haproxy.
"""
import http.client
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SERVER, MODEL = sys.argv[1], sys.argv[2]
if shutil.which("haproxy") is None:
    print("SKIPPED: haproxy is not installed (apt-get install haproxy)")
    sys.exit(77)


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def call(port, method, path, body=None):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request(method, path, body=json.dumps(body) if body else None,
                 headers={"Content-Type": "application/json"} if body else {})
    r = conn.getresponse()
    out = r.status, r.read().decode()
    conn.close()
    return out


def wait_health(port, timeout=30):
    t = time.time()
    while time.time() - t < timeout:
        try:
            if call(port, "GET", "/health")[0] == 200:
                return True
        except OSError:
            time.sleep(0.1)
    return False


def metric(port, name):
    _, text = call(port, "GET", "/metrics")
    m = re.search(r"^" + re.escape(name) + r" (\S+)$", text, re.M)
    return float(m.group(1)) if m else 0.0


def run(balance):
    ports = [free_port(), free_port()]
    replicas = [subprocess.Popen([SERVER, "--model", MODEL, "--threads", "1", "--port", str(p)],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for p in ports]
    front = free_port()
    cfg = open(os.path.join(HERE, "haproxy.cfg")).read()
    cfg = cfg.replace("inter 2s fall 2", "inter 200ms fall 1")  # notice a dead replica quickly
    if balance == "roundrobin":
        cfg = re.sub(r"balance hash var\(txn.key\).*", "balance roundrobin", cfg)
    cfg_file = tempfile.NamedTemporaryFile("w", suffix=".cfg", delete=False)
    cfg_file.write(cfg)
    cfg_file.close()
    env = dict(os.environ, EMBER_LISTEN=f"127.0.0.1:{front}", EMBER_REPLICA_1=f"127.0.0.1:{ports[0]}",
               EMBER_REPLICA_2=f"127.0.0.1:{ports[1]}")
    proxy = None
    try:
        assert all(wait_health(p) for p in ports), "replicas did not start"
        proxy = subprocess.Popen(["haproxy", "-db", "-f", cfg_file.name], env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        assert wait_health(front), "haproxy did not start"
        time.sleep(0.5)  # first health checks
        statuses = []
        for q in range(6):
            for k in range(3):  # odd: round robin sends each prompt to both replicas
                system = f"You are assistant number {k}. " + "Answer briefly and kindly, in plain words. " * 12
                st, _ = call(front, "POST", "/v1/chat/completions",
                             {"messages": [{"role": "system", "content": system},
                                           {"role": "user", "content": f"Question {q} for {k}?"}],
                              "max_tokens": 2, "temperature": 0})
                statuses.append(st)
        cached = sum(metric(p, "ember_prompt_tokens_cached_total") for p in ports)
        total = sum(metric(p, "ember_prompt_tokens_total") for p in ports)
        survived = None
        if balance == "hash":
            replicas[1].terminate()
            replicas[1].wait(timeout=15)
            time.sleep(0.6)
            after = [call(front, "POST", "/v1/chat/completions",
                          {"messages": [{"role": "system", "content": f"prompt {k}"},
                                        {"role": "user", "content": "hi"}], "max_tokens": 2})[0]
                     for k in range(8)]
            survived = all(s == 200 for s in after)
        return statuses, cached / total if total else 0.0, survived
    finally:
        if proxy:
            proxy.terminate()
            proxy.wait(timeout=10)
        for r in replicas:
            if r.poll() is None:
                r.terminate()
                r.wait(timeout=15)
        os.unlink(cfg_file.name)


failures = 0
hash_status, hash_ratio, survived = run("hash")
rr_status, rr_ratio, _ = run("roundrobin")
for ok, what in [(all(s == 200 for s in hash_status + rr_status), "every request through HAProxy answered 200"),
                 (hash_ratio > rr_ratio + 0.05,
                  f"prefix-cache hit ratio: prefix-aware {hash_ratio:.3f} > round robin {rr_ratio:.3f}"),
                 (survived, "a replica killed: the health check and redispatch keep every request answered")]:
    print(("ok:   " if ok else "FAIL: ") + what)
    failures += not ok
sys.exit(1 if failures else 0)
