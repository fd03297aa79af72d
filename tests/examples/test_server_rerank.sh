#!/usr/bin/env bash
# POST /v1/rerank and /rerank on a synthetic BERT reranker (ember-make-synthetic bert-rerank),
# served in fp32: llama-server's request and response shape, and the scores of llama.cpp's rank
# pooling on the same file (tests/data/reference/bert_rerank_scores.json) within 1e-4.
#   test_server_rerank.sh SERVER_BINARY MAKE_SYNTHETIC_BINARY GOLDEN_JSON PYTHON
set -uo pipefail
server=$1 make_synthetic=$2 golden=$3 py=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_harness.sh"

work=$(mktemp -d)
"$make_synthetic" bert-rerank "$work/bert-rerank.gguf" "$work/bert-rerank.json" || exit 1
start_server "$server" --model "$work/bert-rerank.gguf" --threads 2 --precision fp32
"$py" "$here/rerank_client_check.py" "$BASE" "$golden"
result=$?
stop_server || result=1
trap - EXIT
rm -rf "$work"
exit $result
