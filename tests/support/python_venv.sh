#!/usr/bin/env bash
# Sourced by tests that need Python packages from PyPI:
#   source python_venv.sh; ensure_venv VENV_DIR PYTHON PACKAGE...
# creates VENV_DIR with PYTHON on first use and pip-installs the packages any import of which
# fails there (an import name is the package name with '-' as '_'), then sets VENV_PYTHON.
# Exits the test with 77 (ctest's skip) when the venv cannot be made or the index is unreachable.
ensure_venv() {
  local venv=$1 py=$2
  shift 2
  local missing=() p
  for p in "$@"; do
    "$venv/bin/python" -c "import ${p//-/_}" 2>/dev/null || missing+=("$p")
  done
  if [[ ${#missing[@]} -gt 0 ]]; then
    # Tests that share a venv run at once under ctest -j: one at a time makes it, and the
    # others then find it whole (a half-made one, python without pip yet, read as a failure).
    mkdir -p "$(dirname "$venv")"
    local lock
    exec {lock}>"$venv.lock"
    flock "$lock"
    missing=()
    for p in "$@"; do
      "$venv/bin/python" -c "import ${p//-/_}" 2>/dev/null || missing+=("$p")
    done
    if [[ ${#missing[@]} -gt 0 ]]; then
      [[ -x $venv/bin/pip ]] || "$py" -m venv "$venv" ||
        { echo "SKIPPED: cannot create a venv (python3-venv missing?)"; exit 77; }
      "$venv/bin/pip" install -q --disable-pip-version-check "${missing[@]}" ||
        { echo "SKIPPED: pip cannot install ${missing[*]} (no access to the package index?)"; exit 77; }
    fi
    exec {lock}>&-
  fi
  VENV_PYTHON=$venv/bin/python
}
