# Sourced by the ember-server tests: start the server on a free port of 127.0.0.1, wait for
# /health, and always stop it when the test exits.
#   start_server BINARY ARGS...   sets SERVER_PID and BASE (http://127.0.0.1:PORT)
#   stop_server                   SIGTERM, then checks the server stopped cleanly

SERVER_PID=""
SERVER_LOG=""
BASE=""

stop_server() {
  [[ -z $SERVER_PID ]] && return 0
  local pid=$SERVER_PID status=0
  SERVER_PID=""
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
  if kill -0 "$pid" 2>/dev/null; then
    echo "FAIL: the server did not stop within 10 s of SIGTERM"; kill -KILL "$pid"; return 1
  fi
  wait "$pid" || status=$?
  echo "--- server log ---"; cat "$SERVER_LOG"
  [[ $status -eq 0 ]] || { echo "FAIL: the server exited with $status"; return 1; }
}

start_server() {
  SERVER_LOG=$(mktemp)
  "$@" --host 127.0.0.1 --port 0 >"$SERVER_LOG" 2>&1 &
  SERVER_PID=$!
  trap 'stop_server' EXIT
  local port=""
  for _ in $(seq 1 300); do  # the server prints its port once the model is loaded
    port=$(sed -n 's|.* on http://127\.0\.0\.1:\([0-9][0-9]*\) .*|\1|p' "$SERVER_LOG")
    [[ -n $port ]] && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$SERVER_LOG"; echo "FAIL: server died"; exit 1; }
    sleep 0.1
  done
  [[ -n $port ]] || { cat "$SERVER_LOG"; echo "FAIL: server did not start in 30 s"; exit 1; }
  BASE="http://127.0.0.1:$port"
  for _ in $(seq 1 100); do
    curl -sf "$BASE/health" >/dev/null && { echo "server up at $BASE"; return 0; }
    sleep 0.1
  done
  echo "FAIL: $BASE/health did not answer"; exit 1
}
