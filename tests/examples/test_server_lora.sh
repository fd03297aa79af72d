#!/usr/bin/env bash
# LoRA adapters through ember-server as llama-server takes them: two synthetic adapters loaded
# with --lora, GET /lora-adapters, a request's "lora" list (the adapters named, the others off;
# without it every adapter at scale 1), and bad "lora" values answered 400.
#   test_server_lora.sh SERVER_BINARY MAKE_SYNTHETIC_BINARY PYTHON
set -uo pipefail
server=$1 make_synthetic=$2 py=$3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_harness.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }

work=$(mktemp -d)
for seed in 1 2; do  # the same model twice (same shape, same seed), an adapter of each seed
  "$make_synthetic" llama3 "$work/model.gguf" "$work/model.json" --adapter "$work/lora$seed.gguf" \
    --adapter-seed "$seed" --adapter-rank 8 --adapter-alpha 16 || exit 1
done
start_server "$server" --model "$work/model.gguf" --threads 2 --lora "$work/lora1.gguf" --lora "$work/lora2.gguf"
"$py" - "$BASE" "$work" <<'PY'
import json, sys, urllib.error, urllib.request
base, work = sys.argv[1], sys.argv[2]

def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(base + path, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read())

status, listing = call("GET", "/lora-adapters")
assert status == 200, (status, listing)
assert [a["id"] for a in listing] == [0, 1], listing
assert listing[0]["path"].endswith("lora1.gguf") and listing[1]["path"].endswith("lora2.gguf"), listing
assert all(a["scale"] == 1.0 and a["rank"] == 8 for a in listing), listing

def complete(**extra):
    body = {"prompt": "the lighthouse keeper wrote", "max_tokens": 12, "temperature": 0, "ignore_eos": True}
    body.update(extra)
    status, reply = call("POST", "/v1/completions", body)
    assert status == 200, (status, reply)
    return reply["choices"][0]["text"]

base_text = complete(lora=[])
first = complete(lora=[{"id": 0, "scale": 1.0}])
second = complete(lora=[{"id": 1, "scale": 1.0}])
both = complete(lora=[{"id": 0, "scale": 1.0}, {"id": 1, "scale": 1.0}])
default = complete()
print("base", repr(base_text), "| lora 0", repr(first), "| lora 1", repr(second), "| both", repr(both))
assert len({base_text, first, second, both}) >= 3, "the adapters do not change the output"
assert default == both, "without 'lora' every adapter runs at scale 1"
assert complete(lora=[{"id": 0, "scale": 0.0}]) == base_text, "scale 0 leaves the adapter out"
assert complete(lora=[{"id": 0, "scale": 1.0}]) == first, "the same request, the same tokens"
for bad in ([{"id": 7, "scale": 1.0}], "x", [{"scale": 1.0}], [{"id": 0, "weight": 1}]):
    status, reply = call("POST", "/v1/completions", {"prompt": "a", "max_tokens": 2, "lora": bad})
    assert status == 400, (bad, status, reply)
    print("lora", json.dumps(bad), "->", status, reply["error"]["message"])
print("OK")
PY
result=$?
stop_server || result=1
trap - EXIT
rm -rf "$work"
exit $result
