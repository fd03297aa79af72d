#!/usr/bin/env bash
# A thinking model through ember-server and the openai client (thinking_client_check.py): a
# Qwen3-shaped synthetic file with <think> tokens and Qwen3's template, served with
# --chat-template deepseek_r1.jinja (the model reasons first), then with its own template.
# Skips (77) when the package index cannot be reached.
#   test_server_thinking.sh SERVER_BINARY MAKE_SYNTHETIC_BINARY TEMPLATES_DIR PYTHON VENV_DIR
set -uo pipefail
server=$1 make_synthetic=$2 templates=$3 py=$4 venv=$5
here=$(cd "$(dirname "$0")" && pwd)
source "$here/server_harness.sh"
command -v curl >/dev/null || { echo "SKIPPED: curl is not installed"; exit 77; }

source "$here/../support/python_venv.sh"
ensure_venv "$venv" "$py" openai

work=$(mktemp -d)
"$make_synthetic" qwen3 "$work/qwen3-thinking.gguf" "$work/qwen3.json" --reasoning-tokens \
  --chat-template "$templates/qwen3.jinja" || exit 1
start_server "$server" --model "$work/qwen3-thinking.gguf" --threads 2 --chat-template "$templates/deepseek_r1.jinja"
"$VENV_PYTHON" "$here/thinking_client_check.py" "$BASE" r1
result=$?
stop_server || result=1
start_server "$server" --model "$work/qwen3-thinking.gguf" --threads 2
"$VENV_PYTHON" "$here/thinking_client_check.py" "$BASE" qwen3 || result=1
stop_server || result=1
trap - EXIT
rm -rf "$work"
exit $result
