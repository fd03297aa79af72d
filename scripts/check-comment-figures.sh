#!/usr/bin/env bash
# Fails when a comment under lib/, kernels/ or include/ carries a measured figure (a rate, a
# bandwidth, a timing set against another, a quality score, "the dev box"): such a figure goes
# stale unseen. Figures live in docs/benchmarks.md under an anchor the comment names; the
# comment keeps one sentence of why.
#
#   scripts/check-comment-figures.sh [ALLOW_FILE]
#
# ALLOW_FILE (default scripts/comment-figures-allowed.txt) lists files, one path a line (# starts
# a comment), that are still being rewritten and are not checked yet; the list should only shrink.
set -euo pipefail
cd "$(dirname "$0")/.."

allow_file=${1:-scripts/comment-figures-allowed.txt}
allowed=()
if [[ -f $allow_file ]]; then
  while IFS= read -r line; do
    line=${line%%#*}
    line=${line//[[:space:]]/}
    [[ -n $line ]] && allowed+=("$line")
  done <"$allow_file"
fi

# A figure: a number with a rate or bandwidth unit, a timing against another timing, a top-1 or
# KL score, or a machine named as where something was measured.
figure='[0-9] ?(tokens?/s|tok/s|GB/s|GiB/s|GOPS|GFLOPS|TFLOPS|ms/token|ms/tok)'
figure+='|dev box'
figure+='|[0-9] ?% top-1|top-1 [0-9]|points of top-1|KL (of )?[0-9]'
figure+='|[0-9] ?(ms|us) (->|vs|against|without|with) '
# ... a timing after another (11 -> 6 ms, 20 / 21 us) or out of another, a percentage faster,
# slower or of a call, a factor longer or faster.
figure+='|[0-9] ?(->|/) ?[0-9.]+ ?(ms|us)\b|[0-9] ?(us|ms) of the [0-9]'
figure+='|[0-9] ?% (slower|faster)|(slower|faster) by [0-9]|[0-9] ?% of (a|an|each|every) '
figure+='|[0-9.]+ ?x (longer|faster|slower|more|less)'
# Only comments: a line's // part, or a line inside a /* */ block that starts with *.
comment='(//|/\*|^[[:space:]]*\*)'

status=0
while IFS= read -r -d '' file; do
  skip=0
  for a in "${allowed[@]+"${allowed[@]}"}"; do [[ $file == "$a" ]] && skip=1; done
  ((skip)) && continue
  if hits=$(grep -nE "${comment}.*(${figure})" "$file"); then
    while IFS= read -r hit; do echo "$file:$hit"; done <<<"$hits"
    status=1
  fi
done < <(find lib kernels include -type f \( -name '*.hpp' -o -name '*.cpp' -o -name '*.h' -o -name '*.inc' -o -name '*.cu' -o -name '*.cuh' \) -print0 | sort -z)

if ((status)); then
  echo "check-comment-figures: measured figures in comments (above): move each to an anchored section of" \
       "docs/benchmarks.md and leave one sentence of why plus the anchor" >&2
fi
exit $status
