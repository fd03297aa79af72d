#!/usr/bin/env bash
# ember-server driven by the official openai Python client, installed into a venv under the
# build folder on first use. Skips (77) when the package index cannot be reached.
#   test_server_openai.sh SERVER_BINARY MODEL PYTHON VENV_DIR
set -uo pipefail
server=$1 model=$2 py=$3 venv=$4
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_harness.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }

source "$here/../support/python_venv.sh"
ensure_venv "$venv" "$py" openai

alone=$(mktemp)
start_server "$server" --model "$model" --threads 2 --max-body-bytes 65536 --max-prompt-tokens 1500
"$VENV_PYTHON" "$here/openai_client_check.py" "$BASE" "$alone"
result=$?
stop_server || result=1
# The batch window holds the engine until all 16 concurrent requests are queued (30 s at most),
# so they share every step whatever the load on the machine.
start_server "$server" --model "$model" --threads 2 --batch-min 16 --batch-wait-ms 30000
"$VENV_PYTHON" "$here/openai_client_check.py" --batched "$BASE" "$alone" || result=1
stop_server || result=1
trap - EXIT
rm -f "$alone"
exit $result
