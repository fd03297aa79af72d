#!/usr/bin/env bash
# Formats ember's C, C++ and CUDA sources, the .inc fragments that tier files include among them,
# with clang-format and the repository's .clang-format.
#
#   scripts/format.sh            rewrite every tracked source in place
#   scripts/format.sh --check    change nothing; list the files that are not formatted, exit 1 if any
#   scripts/format.sh FILE...    only these files (with or without --check)
#
# CLANG_FORMAT names the binary (default: clang-format). Output of one clang-format version can
# differ from another's: format with the version CI uses (Debian's, `clang-format --version`).
set -euo pipefail
cd "$(dirname "$0")/.."

clang_format=${CLANG_FORMAT:-clang-format}
check=0
if [[ ${1:-} == --check ]]; then
  check=1
  shift
fi

files=("$@")
if ((${#files[@]} == 0)); then
  mapfile -t files < <(git ls-files '*.c' '*.h' '*.cpp' '*.hpp' '*.inc' '*.cu' '*.cuh' | grep -v '^tests/data/')
fi

status=0
for f in "${files[@]}"; do
  if ((check)); then
    if ! "$clang_format" --style=file "$f" | cmp -s - "$f"; then
      echo "$f"
      status=1
    fi
  else
    "$clang_format" --style=file -i "$f"
  fi
done
exit $status
