#!/usr/bin/env bash
# Creates the Python venv that produces ember's llama.cpp reference outputs and benchmarks:
# gguf, numpy, jinja2 and llama-cpp-python (which compiles llama.cpp from source, several
# minutes). Prints the venv's python path on stdout; everything else goes to stderr.
#
#   tests/reference/setup_venv.sh [VENV_DIR]   default ${EMBER_CACHE_DIR:-$HOME/.cache/ember}/venv-ref
#
# A complete venv (all four packages import) is left untouched. Concurrent runs serialise on a
# lock file beside the venv, so two shells never build llama-cpp-python at the same time.
# CMAKE_ARGS from the environment is passed through to the llama.cpp build when set.
set -euo pipefail

venv=${1:-${EMBER_CACHE_DIR:-$HOME/.cache/ember}/venv-ref}
python=$venv/bin/python
packages=(gguf numpy jinja2 llama-cpp-python)

complete() {
  [[ -x $python ]] && "$python" -c 'import gguf, numpy, jinja2, llama_cpp' 2>/dev/null
}

if complete; then
  echo "$python"
  exit 0
fi

mkdir -p "$(dirname "$venv")"
exec 9>"$venv.lock"
if ! flock --nonblock 9; then
  echo "setup_venv: another setup of $venv is running; waiting for it" >&2
  flock 9
fi
# The run we waited for may have finished the job.
if complete; then
  echo "$python"
  exit 0
fi

[[ -x $python ]] || python3 -m venv "$venv" >&2
"$python" -m pip install --disable-pip-version-check --upgrade pip >&2
echo "setup_venv: installing ${packages[*]} into $venv (llama-cpp-python builds llama.cpp: minutes)" >&2
"$python" -m pip install --disable-pip-version-check "${packages[@]}" >&2

if ! complete; then
  echo "setup_venv: $venv is still incomplete after pip install" >&2
  exit 1
fi
echo "$python"
