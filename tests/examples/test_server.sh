#!/usr/bin/env bash
# ember-server exercised with curl: every endpoint, streaming, 16 concurrent streams batched by
# the engine, a client that disconnects mid-stream, each kind of bad input, and --max-requests.
#   test_server.sh SERVER_BINARY MODEL PYTHON
set -uo pipefail
server=$1 model=$2 py=$3
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_harness.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }

tmp=$(mktemp -d)
failures=0
check() {  # check DESCRIPTION COMMAND...
  local what=$1; shift
  if "$@"; then echo "ok:   $what"; else echo "FAIL: $what"; failures=$((failures + 1)); fi
}
# post PATH JSON: the response body goes to $tmp/body, the status to $status.
post() {
  status=$(curl -s --max-time 120 -o "$tmp/body" -w '%{http_code}' \
                -H 'Content-Type: application/json' --data-binary "$2" "$BASE$1")
}
get() { status=$(curl -s --max-time 30 -o "$tmp/body" -w '%{http_code}' "$BASE$1"); }
# py_true EXPR: EXPR over the JSON body `d` (and `t`, the raw text) is true.
py_true() {
  "$py" -c 'import json,sys
t = open(sys.argv[1]).read()
try: d = json.loads(t)
except ValueError: d = None
sys.exit(0 if eval(sys.argv[2]) else 1)' "$tmp/body" "$1"
}
metric() {  # metric NAME_WITH_LABELS -> value (0 when absent)
  curl -s --max-time 30 "$BASE/metrics" | awk -v m="$1" '$1 == m { print $2; found=1 } END { if (!found) print 0 }'
}
bad_request() {  # bad_request DESCRIPTION PATH JSON STATUS PYTHON_CHECK_ON_ERROR
  post "$2" "$3"
  check "$1 -> $4 with an OpenAI error body" \
    py_true "$status == $4 and set(d['error']) == {'message','type','param','code'} and ($5)"
}

start_server "$server" --model "$model" --threads 2 --max-body-bytes 65536 --max-prompt-tokens 1500

# ---- plain endpoints ------------------------------------------------------------------------
get /health;    check "GET /health" py_true "$status == 200 and d == {'status': 'ok'}"
get /v1/models; check "GET /v1/models lists the model" \
  py_true "$status == 200 and d['object'] == 'list' and d['data'][0]['id'] == 'example-model'"

post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0}'
check "POST /v1/completions" py_true "$status == 200 and d['object'] == 'text_completion' and \
  d['id'].startswith('cmpl-') and d['choices'][0]['finish_reason'] in ('stop', 'length') and \
  0 < d['usage']['completion_tokens'] <= 6 and d['usage']['prompt_tokens'] > 0 and \
  d['usage']['total_tokens'] == d['usage']['prompt_tokens'] + d['usage']['completion_tokens']"
cp "$tmp/body" "$tmp/first"
post /v1/completions '{"prompt": "Once upon a time", "max_tokens": 6, "temperature": 0}'
check "greedy completions repeat" py_true "d['choices'][0]['text'] == \
  json.load(open('$tmp/first'))['choices'][0]['text']"

chat='{"messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi!"}],
       "max_tokens": 8, "temperature": 0, "ignore_eos": true'
post /v1/chat/completions "$chat}"
check "POST /v1/chat/completions" py_true "$status == 200 and d['object'] == 'chat.completion' and \
  d['choices'][0]['message']['role'] == 'assistant' and d['usage']['completion_tokens'] == 8 and \
  d['choices'][0]['finish_reason'] == 'length'"
cp "$tmp/body" "$tmp/chat"

# ---- streaming ------------------------------------------------------------------------------
curl -sN --max-time 120 -H 'Content-Type: application/json' \
     --data-binary "$chat, \"stream\": true, \"stream_options\": {\"include_usage\": true}}" \
     "$BASE/v1/chat/completions" >"$tmp/body"
check "streamed chat: SSE chunks, role first, finish chunk, usage, [DONE], same text" py_true "
(lambda ev: ev[-1] == '[DONE]' and all(t.startswith('data: ') for t in t.strip().split('\n\n'))
 and json.loads(ev[0])['choices'][0]['delta']['role'] == 'assistant'
 and all(json.loads(e)['object'] == 'chat.completion.chunk' for e in ev[:-1])
 and json.loads(ev[-3])['choices'][0]['finish_reason'] == 'length'
 and json.loads(ev[-2])['usage']['completion_tokens'] == 8
 and ''.join(c['delta'].get('content', '') for e in ev[:-2] for c in json.loads(e)['choices'])
     == json.load(open('$tmp/chat'))['choices'][0]['message']['content'])(
 [s[len('data: '):] for s in t.strip().split('\n\n')])"

# ---- a client that disconnects mid-stream -----------------------------------------------------
cancelled0=$(metric 'ember_completions_total{finish_reason="cancelled"}')
curl -sN --max-time 60 -H 'Content-Type: application/json' --data-binary \
  '{"prompt": "Tell me everything.", "max_tokens": 4000, "ignore_eos": true, "stream": true}' \
  "$BASE/v1/completions" | head -c 400 >/dev/null
cancelled=0
for _ in $(seq 1 100); do
  cancelled=$(metric 'ember_completions_total{finish_reason="cancelled"}')
  [[ $cancelled -gt $cancelled0 ]] && break
  sleep 0.2
done
check "a disconnected stream is cancelled" test "$cancelled" -eq $((cancelled0 + 1))
get /health; check "the server still answers after the disconnect" test "$status" -eq 200

# ---- bad input ------------------------------------------------------------------------------
bad_request "malformed JSON" /v1/completions '{"prompt": "hi",' 400 \
  "d['error']['code'] == 'invalid_json' and d['error']['type'] == 'invalid_request_error'"
bad_request "a body that is not an object" /v1/completions '[1, 2]' 400 "True"
bad_request "max_tokens of the wrong type" /v1/completions '{"prompt": "hi", "max_tokens": "ten"}' \
  400 "d['error']['param'] == 'max_tokens'"
bad_request "temperature out of range" /v1/completions '{"prompt": "hi", "temperature": -1}' \
  400 "d['error']['param'] == 'temperature'"
bad_request "stream of the wrong type" /v1/completions '{"prompt": "hi", "stream": "yes"}' \
  400 "d['error']['param'] == 'stream'"
bad_request "stop with a number" /v1/completions '{"prompt": "hi", "stop": ["a", 3]}' \
  400 "d['error']['param'] == 'stop'"
bad_request "a prompt array" /v1/completions '{"prompt": ["a", "b"]}' 400 "d['error']['param'] == 'prompt'"
bad_request "no prompt" /v1/completions '{"max_tokens": 3}' 400 "d['error']['param'] == 'prompt'"
bad_request "messages not an array" /v1/chat/completions '{"messages": "hello"}' \
  400 "d['error']['param'] == 'messages'"
bad_request "an unknown role" /v1/chat/completions '{"messages": [{"role": "wizard", "content": "x"}]}' \
  400 "d['error']['param'] == 'messages[0].role'"
bad_request "n > 1" /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "n": 2}' \
  400 "d['error']['param'] == 'n'"
long=$("$py" -c 'print("hello " * 2000)')
bad_request "a prompt over --max-prompt-tokens" /v1/completions "{\"prompt\": \"$long\"}" 400 \
  "d['error']['code'] == 'context_length_exceeded' and d['error']['param'] == 'prompt'"
huge=$("$py" -c 'print("x" * 70000)')
bad_request "a body over --max-body-bytes" /v1/completions "{\"prompt\": \"$huge\"}" 413 \
  "d['error']['code'] == 'request_too_large'"
get /v1/nothing
check "an unknown route -> 404 with an OpenAI error body" py_true "$status == 404 and 'error' in d"
post /v1/completions '{"prompt": "hi", "max_tokens": 2, "logit_bias": {}, "user": "x"}'
check "logit_bias {} and user are accepted" py_true "$status == 200"
bad_request "an unimplemented field" /v1/completions '{"prompt": "hi", "foo": [1]}' \
  400 "d['error']['param'] == 'foo'"
bad_request "a bad response_format" /v1/chat/completions \
  '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "yaml"}}' \
  400 "d['error']['param'] == 'response_format.type'"
bad_request "a schema ember cannot honour (a remote \$ref)" /v1/chat/completions \
  '{"messages": [{"role": "user", "content": "x"}], "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"$ref": "https://example.com/s.json"}}}}' \
  400 "'remote' in d['error']['message']"
post /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "max_tokens": 4, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "array", "items": {"type": "string", "format": "color"}}}}}'
check "a relaxed schema -> 200, its warnings name the keyword" py_true "$status == 200 and \"'color'\" in d['warnings'][0]"
post /v1/chat/completions '{"messages": [{"role": "user", "content": "x"}], "max_tokens": 12, "response_format": {"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]}}}}'
check "a schema with a small max_tokens -> whole JSON; closed_early only with finish_reason length" py_true "$status == 200 and \
  'a' in json.loads(d['choices'][0]['message']['content']) and \
  (not d['choices'][0].get('closed_early') or d['choices'][0]['finish_reason'] == 'length')"
bad_request "tool_choice without tools" /v1/chat/completions \
  '{"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"}' \
  400 "d['error']['param'] == 'tool_choice'"
bad_request "a logit_bias key that is no token id" /v1/completions '{"prompt": "hi", "logit_bias": {"a": 1}}' \
  400 "d['error']['param'] == 'logit_bias'"

# ---- metrics --------------------------------------------------------------------------------
curl -s "$BASE/metrics" >"$tmp/body"
check "metrics: Prometheus text with counters, the TTFT histogram and the hit ratio" py_true "
all(s in t for s in ['# TYPE ember_http_requests_total counter',
  'ember_http_requests_total{endpoint=\"/v1/completions\",status=\"200\"}',
  'ember_http_requests_total{endpoint=\"/v1/completions\",status=\"413\"} 1',
  'ember_time_to_first_token_seconds_bucket{le=\"+Inf\"}', 'ember_time_to_first_token_seconds_count',
  'ember_prompt_tokens_total', 'ember_generated_tokens_total', 'ember_prefix_cache_hit_ratio'])"
check "the prefix cache served the repeated prompts" py_true "
[float(l.split()[1]) for l in t.splitlines() if l.startswith('ember_prefix_cache_hit_ratio ')][0] > 0"

stop_server || failures=$((failures + 1))

# ---- 16 concurrent streams, batched by the engine -------------------------------------------
# The batch window holds the engine until all 16 are queued (30 s at most), so they share every
# step whatever the load on the machine: about 48 steps; one sequence per step would take 768.
start_server "$server" --model "$model" --threads 2 --batch-min 16 --batch-wait-ms 30000
steps0=$(metric ember_engine_steps_total); tokens0=$(metric ember_generated_tokens_total)
# One curl process runs the 16 transfers in parallel (-Z), so they reach the server together.
transfers=()
for i in $(seq 1 16); do
  [[ $i -gt 1 ]] && transfers+=(--next)
  transfers+=(-sN --max-time 120 -H 'Content-Type: application/json' -o "$tmp/stream$i" --data-binary
    "{\"prompt\": \"Request number $i:\", \"max_tokens\": 48, \"ignore_eos\": true, \"seed\": $i, \"stream\": true}"
    "$BASE/v1/completions")
done
curl -Z --parallel-immediate --parallel-max 16 "${transfers[@]}"
ok=0
for i in $(seq 1 16); do
  tail -c 1000 "$tmp/stream$i" | grep -q '"finish_reason":"length"' && \
    [[ $(tail -c 14 "$tmp/stream$i") == 'data: [DONE]' ]] && ok=$((ok + 1))
done
check "16 concurrent streams all finished with [DONE] ($ok/16)" test "$ok" -eq 16
steps=$(( $(metric ember_engine_steps_total) - steps0 ))
tokens=$(( $(metric ember_generated_tokens_total) - tokens0 ))
check "concurrent requests share engine steps ($tokens tokens in $steps steps)" \
  test "$tokens" -eq $((16 * 48)) -a "$steps" -lt $((2 * 48))
stop_server || failures=$((failures + 1))

# ---- --max-requests: one request in flight; eight at once get 200 or 429 ---------------------
start_server "$server" --model "$model" --threads 1 --max-requests 1
pids=()
for i in $(seq 1 8); do
  curl -s --max-time 120 -o "$tmp/busy$i" -w '%{http_code}' -H 'Content-Type: application/json' \
    --data-binary '{"prompt": "Once upon a time", "max_tokens": 64, "ignore_eos": true}' \
    "$BASE/v1/completions" >"$tmp/busy$i.status" &
  pids+=($!)
done
wait "${pids[@]}"
check "past --max-requests -> 429 rate_limit_exceeded; the request in flight completes" "$py" -c '
import json, sys
tmp = sys.argv[1]
got = [(open(f"{tmp}/busy{i}.status").read(), json.load(open(f"{tmp}/busy{i}"))) for i in range(1, 9)]
ok = [d for s, d in got if s == "200" and d["usage"]["completion_tokens"] == 64]
busy = [d for s, d in got if s == "429" and d["error"]["code"] == "rate_limit_exceeded"]
sys.exit(0 if ok and busy and len(ok) + len(busy) == 8 else 1)' "$tmp"
stop_server || failures=$((failures + 1))
trap - EXIT
rm -rf "$tmp"
[[ $failures -eq 0 ]] && { echo "all checks passed"; exit 0; }
echo "$failures check(s) failed"; exit 1
