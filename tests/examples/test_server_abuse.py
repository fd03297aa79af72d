#!/usr/bin/env python3
"""ember-server against an adversarial client (docs/robustness.md, "HTTP front end"):

  test_server_abuse.py SERVER MODEL [REAL_MODEL|--default-model|-]

- 1,000 idle connections plus 100 slowloris connections (a header line a second): /health p99
  <= 100 ms over new connections, and a greedy chat completion returns its usual text;
- a chunked body over --max-body-bytes gets 413, a 60,000-deep JSON body 400;
- --max-connections: the next connection gets 503 with Retry-After; --header-timeout-ms closes
  idle and trickling connections; --max-requests answers 429 with Retry-After;
- a non-streaming request whose client leaves is cancelled within 1 s: waiting in the batch
  window (synthetic model), and mid-generation (the real model, when there is one).
"""
import http.client
import json
import os
import re
import resource
import socket
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from example_support import Checks, default_model  # noqa: E402

SERVER, MODEL = sys.argv[1], sys.argv[2]
REAL = sys.argv[3] if len(sys.argv) > 3 else "-"
if REAL == "--default-model":
    REAL = default_model() or "-"
checks = Checks()


def start(model, *args, timeout=60, required=True):
    proc = subprocess.Popen([SERVER, "--model", model, "--host", "127.0.0.1", "--port", "0", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    port = None
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        m = re.search(r"on http://127\.0\.0\.1:(\d+) ", line)
        if m:
            port = int(m.group(1))
            break
    if port is None:
        proc.kill()
        print(proc.stdout.read())
        if not required:
            return None, None
        sys.exit("FAIL: the server did not start")
    threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()  # drain
    return proc, port


def stop(proc):
    proc.terminate()
    try:
        checks.expect(proc.wait(timeout=15) == 0, "the server stops cleanly on SIGTERM")
    except subprocess.TimeoutExpired:
        proc.kill()
        checks.expect(False, "the server stops within 15 s of SIGTERM")


def call(port, method, path, body=None, timeout=60):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    data = json.dumps(body) if isinstance(body, (dict, list)) else body
    conn.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
    r = conn.getresponse()
    out = (r.status, dict(r.getheaders()), r.read().decode("utf-8", "replace"))
    conn.close()
    return out


def metric(port, name):
    _, _, text = call(port, "GET", "/metrics")
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{") and line.split()[0] == name:
            return float(line.split()[1])
    return 0.0


def raw(port, payload=b""):
    s = socket.create_connection(("127.0.0.1", port))
    if payload:
        s.sendall(payload)
    return s


def closed_by_server(s, within):
    s.settimeout(within)
    try:
        while True:
            data = s.recv(65536)
            if not data:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


CHAT = {"messages": [{"role": "user", "content": "Say hello to the abusive client."}], "max_tokens": 24,
        "temperature": 0}

soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the server inherits it
idle_n, slow_n = (1000, 100) if hard >= 2400 else (max(0, hard // 2 - 150), 50)
if idle_n < 1000:
    print(f"note: RLIMIT_NOFILE {hard}: {idle_n} idle connections instead of 1,000")

# ---- 1. thousands of idle and slow connections ------------------------------------------------
proc, port = start(MODEL, "--threads", "1", "--max-body-bytes", "65536", "--max-connections", "4000",
                   "--header-timeout-ms", "60000")
status, headers, body = call(port, "POST", "/v1/chat/completions", CHAT)
baseline = json.loads(body)["choices"][0]["message"]["content"] if status == 200 else None
checks.expect(status == 200 and baseline, "a greedy chat completion before the abuse")
timing = headers.get("Server-Timing", "")
checks.expect(all(f"{k};dur=" in timing for k in ("parse", "queue", "prefill", "decode", "write")),
              f"Server-Timing names parse, queue, prefill, decode, write: {timing!r}")

# A short stream often finishes on the engine's thread before submit() returns (and one with
# max_tokens 0 always does, inside submit): its end must still reach the client (the last chunk
# of the chunked body), or the client waits forever.
ended = 0
for path, req in (("/v1/completions", {"prompt": "hi", "max_tokens": 3, "stream": True}),
                  ("/v1/chat/completions", {"messages": [{"role": "user", "content": "hi"}], "max_tokens": 0,
                                            "stream": True})):
    for _ in range(10):
        try:
            status, _, text = call(port, "POST", path, req, timeout=15)
            ended += status == 200 and text.rstrip().endswith("data: [DONE]")
        except (socket.timeout, TimeoutError):
            pass
checks.expect(ended == 20, f"20 short streams each end (their last chunk arrives): {ended} did")
# logit_bias ids past int32 are refused, not wrapped round to a small id (4294967361 = 2^32 + 65).
for key in ("4294967361", " 65", "+65", "-1"):
    status, _, _ = call(port, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 1, "logit_bias": {key: 1}})
    checks.expect(status == 400, f"logit_bias key {key!r}: 400 (got {status})")

idle = [raw(port) for _ in range(idle_n)]
slow = [raw(port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n") for _ in range(slow_n)]
stop_trickle = threading.Event()


def trickle():
    k = 0
    while not stop_trickle.wait(1.0):
        for s in slow:
            try:
                s.send(b"X-Slow-%d: 1\r\n" % k)
            except OSError:
                pass
        k += 1


threading.Thread(target=trickle, daemon=True).start()
time.sleep(0.5)
opened = metric(port, "ember_http_connections_open")
checks.expect(opened >= idle_n + slow_n, f"{idle_n} idle + {slow_n} slowloris connections are open ({opened:.0f})")

def health_round():
    latencies = []
    for _ in range(200):
        t = time.perf_counter()
        st, _, _ = call(port, "GET", "/health", timeout=10)
        latencies.append((time.perf_counter() - t) * 1000 if st == 200 else 1e9)
    latencies.sort()
    return latencies[len(latencies) // 2], latencies[int(len(latencies) * 0.99) - 1]


# A second round only when the first missed: on a shared 2-core machine (CI, sanitizers) another
# process can take both cores for a moment; a server that is starved misses both.
p50, p99 = health_round()
if p99 > 100:
    print(f"note: first round p99 {p99:.1f} ms; measuring again")
    p50, p99 = min([(p50, p99), health_round()], key=lambda r: r[1])
checks.expect(p99 <= 100, f"/health during the abuse: p50 {p50:.1f} ms, p99 {p99:.1f} ms (<= 100 ms)")
status, _, body = call(port, "POST", "/v1/chat/completions", CHAT)
text = json.loads(body)["choices"][0]["message"]["content"] if status == 200 else None
checks.expect(text == baseline, "the chat completion during the abuse returns the same greedy text")

# A chunked body over --max-body-bytes: 413 once the limit is crossed, then the connection closes.
s = raw(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
              b"Transfer-Encoding: chunked\r\n\r\n")
piece = b"%x\r\n%s\r\n" % (8192, b"a" * 8192)
sent, answer = 0, b""
s.settimeout(0.05)
while sent < (8 << 20) and b"\r\n\r\n" not in answer:
    try:
        s.sendall(piece)
        sent += 8192
    except OSError:
        break
    try:
        answer += s.recv(4096)
    except (socket.timeout, BlockingIOError):
        pass
    except OSError:
        break
s.settimeout(5)
try:
    while b"request_too_large" not in answer:
        more = s.recv(4096)
        if not more:
            break
        answer += more
except OSError:
    pass
checks.expect(answer.startswith(b"HTTP/1.1 413") and b"request_too_large" in answer,
              f"a chunked body over --max-body-bytes gets 413 (after {sent // 1024} KiB were sent)")
s.close()
status, _, body = call(port, "POST", "/v1/completions", "[" * 60000)
checks.expect(status == 400 and "levels deep" in body, "60,000 nested arrays: 400 before parsing")

stop_trickle.set()
for s in idle + slow:
    s.close()
stop(proc)

# ---- 2. the connection cap, timeouts, 429, an abandoned request --------------------------------
proc, port = start(MODEL, "--threads", "1", "--max-connections", "6", "--header-timeout-ms", "800",
                   "--batch-min", "2", "--batch-wait-ms", "4000", "--max-requests", "1")
held = [raw(port) for _ in range(6)]
time.sleep(0.2)
extra = raw(port)
extra.settimeout(5)
reply = extra.recv(4096)
checks.expect(reply.startswith(b"HTTP/1.1 503") and b"Retry-After: 1" in reply,
              "past --max-connections the next connection gets 503 with Retry-After")
extra.close()
t = time.time()
checks.expect(all(closed_by_server(s, 3) for s in held),
              f"--header-timeout-ms 800 closes idle connections ({time.time() - t:.1f} s)")
loris = raw(port, b"GET /health HTTP/1.1\r\n")
t, closed = time.time(), False
while time.time() - t < 3:
    try:
        loris.send(b"X-A: b\r\n")
    except OSError:
        closed = True
        break
    if closed_by_server(loris, 0.2):
        closed = True
        break
checks.expect(closed and time.time() - t < 2.5, f"a slowloris head is cut after {time.time() - t:.1f} s")
loris.close()

# The batch window holds the first request (--batch-min 2): a second one is over --max-requests.
body = json.dumps({"prompt": "hi", "max_tokens": 4}).encode()
CANCELLED = 'ember_completions_total{finish_reason="cancelled"}'


def post_held():
    """A raw connection whose completion request the batch window holds."""
    s = raw(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    time.sleep(0.3)
    return s


def leave_and_expect_cancel(s, what):
    """Closes s and checks that its request is cancelled within 1 s."""
    before = metric(port, CANCELLED)
    s.close()
    t = time.time()
    while time.time() - t < 1.0 and metric(port, CANCELLED) == before:
        time.sleep(0.05)
    checks.expect(metric(port, CANCELLED) == before + 1, f"{what} ({time.time() - t:.2f} s)")


first = post_held()
status, headers, _ = call(port, "POST", "/v1/completions", {"prompt": "hi", "max_tokens": 4})
checks.expect(status == 429 and headers.get("Retry-After") == "1", "busy: 429 with Retry-After: 1")
leave_and_expect_cancel(first, "an abandoned waiting request is cancelled within 1 s")
# The same after the client sent more bytes (the start of a pipelined request) before leaving.
first = post_held()
first.sendall(b"GET /health HTTP/1.1\r\n")
time.sleep(0.3)
leave_and_expect_cancel(first, "an abandoned request is cancelled after pipelined bytes too")
# More pipelined bytes than a connection's buffer holds: the watch stops there, the server lives on.
first = post_held()
first.sendall(b"X" * 20000)
time.sleep(0.5)
status, _, _ = call(port, "GET", "/health")
checks.expect(status == 200 and proc.poll() is None, "20 KB of pipelined bytes during a request: the server lives on")
first.close()
stop(proc)

# ---- 3. an abandoned request mid-generation (the real model: slow enough to catch) -------------
if REAL != "-" and os.path.isfile(REAL):
    # A sanitizer build loads the real model slowly: not starting in time skips this part.
    proc, port = start(REAL, "--threads", "2", timeout=170, required=False)
if REAL != "-" and os.path.isfile(REAL) and proc is None:
    print("note: the real model did not load in time; the mid-generation cancel is not checked")
elif REAL != "-" and os.path.isfile(REAL):
    body = json.dumps({"prompt": "Count from 1 to 1000: 1, 2, 3,", "max_tokens": 1500,
                       "temperature": 0}).encode()
    s = raw(port, b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
    time.sleep(1.0)
    generated0 = metric(port, "ember_generated_tokens_total")
    s.close()
    t = time.time()
    while time.time() - t < 1.0 and metric(port, 'ember_completions_total{finish_reason="cancelled"}') == 0:
        time.sleep(0.05)
    finished = metric(port, 'ember_completions_total{finish_reason="length"}') + \
        metric(port, 'ember_completions_total{finish_reason="stop"}')
    if finished:
        print("note: the request finished before its client left; mid-generation cancel not checked")
    else:
        checks.expect(metric(port, 'ember_completions_total{finish_reason="cancelled"}') == 1,
                      f"a request abandoned mid-generation is cancelled within 1 s ({time.time() - t:.2f} s)")
        checks.expect(metric(port, "ember_generated_tokens_total") < 1500,
                      f"it stopped early ({metric(port, 'ember_generated_tokens_total'):.0f} tokens)")
    stop(proc)
else:
    print("note: no real model; the mid-generation cancel is not checked")

checks.finish()
