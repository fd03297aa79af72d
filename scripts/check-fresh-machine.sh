#!/usr/bin/env bash
# Proves that the README's two set-up commands work on a machine that has nothing installed:
# builds a minimal Debian 12 root (debootstrap --variant=minbase) inside the build folder,
# copies a clean `git archive` of this tree into it and runs there, as root in a chroot with
# /proc mounted, `scripts/demo.sh --max-tokens 8` and then `scripts/test.sh` on a fast subset of
# the suite (model, tokenizer, engine, C API). Any package the scripts forget to install fails
# this check. Needs root (debootstrap and chroot); installs debootstrap on the host if missing.
#
# The pristine debootstrap root is the slow part: it is kept as a tarball in
# ${EMBER_FRESH_CACHE:-$HOME/.cache/ember/fresh-machine} and unpacked anew for every run, so each
# run starts from the same empty machine. Downloaded .deb files are kept there too (apt still
# installs every package; only the download is skipped).
#
# The chroot gets what belongs to the machine, not to the project: its apt mirror (read from the
# host's apt sources, never written into the tree), its DNS and the certificate authorities it
# trusts, and the proxy and pip index settings of its environment.
#
# The log is build/fresh-machine/log; its last lines summarise the run.
set -euo pipefail
cd "$(dirname "$0")/.."
source_dir=$PWD
work=$source_dir/build/fresh-machine
root=$work/root
cache=${EMBER_FRESH_CACHE:-$HOME/.cache/ember/fresh-machine}
suite=bookworm
log=$work/log

die() { echo "check-fresh-machine: $*" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || die "must run as root (debootstrap and chroot need it)"

# The Debian mirror of the host: the first URI serving $suite's main component.
host_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk -v suite="$suite" '
      /^URIs:/ { uris = $2 } /^Suites:/ { ok = 0; for (i = 2; i <= NF; ++i) if ($i == suite) ok = 1 }
      /^$/ { if (ok && uris != "") { print uris; exit } uris = ""; ok = 0 }
      END { if (ok && uris != "") print uris }' "$f" | head -n 1
  done
  if [[ -f /etc/apt/sources.list ]]; then
    awk -v suite="$suite" '$1 == "deb" && $3 == suite { print $2; exit }' /etc/apt/sources.list
  fi
}
mirror=$(host_mirror | head -n 1)
[[ -n $mirror ]] || die "no apt source for Debian $suite on this machine to take the mirror from"

if ! command -v debootstrap >/dev/null; then
  echo "check-fresh-machine: installing debootstrap on the host" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap >&2
fi

start=$(date +%s)
mkdir -p "$work" "$cache/apt-archives"
: >"$log"
note() { echo "check-fresh-machine: $*" | tee -a "$log" >&2; }

unmount_all() {
  local m
  for m in "$root/var/cache/apt/archives" "$root/proc"; do
    mountpoint -q "$m" 2>/dev/null && umount -l "$m"
  done
  return 0
}
trap unmount_all EXIT
unmount_all

pristine=$cache/debootstrap-$suite-minbase.tar
if [[ ! -f $pristine ]]; then
  note "debootstrap --variant=minbase $suite from $mirror (cached for later runs in $pristine)"
  rm -rf "$work/debootstrap"
  debootstrap --variant=minbase "$suite" "$work/debootstrap" "$mirror" >>"$log" 2>&1 ||
    die "debootstrap failed; see $log"
  tar -C "$work/debootstrap" -cf "$pristine.partial" . && mv "$pristine.partial" "$pristine"
  rm -rf "$work/debootstrap"
fi
rm -rf "$root"
mkdir -p "$root"
tar -C "$root" -xf "$pristine"

# The machine's network and trust, as a new machine of this kind would have them.
cp -L /etc/resolv.conf "$root/etc/resolv.conf"
if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
  mkdir -p "$root/usr/local/share/ca-certificates"
  cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
fi
[[ -f /etc/pip.conf ]] && cp /etc/pip.conf "$root/etc/pip.conf"
passed_env=()
for v in http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY \
         PIP_INDEX_URL PIP_EXTRA_INDEX_URL PIP_TRUSTED_HOST PIP_CERT PIP_DEFAULT_TIMEOUT; do
  [[ -n ${!v:-} ]] && passed_env+=("$v=${!v}")
done

# The tree as committed, plus the changes to tracked files not committed yet (`git stash
# create` records them without touching the work tree); untracked files are not part of it.
revision=$(git stash create)
revision=${revision:-HEAD}
mkdir -p "$root/ember"
git archive "$revision" | tar -x -C "$root/ember"

mount -t proc proc "$root/proc"
mount --bind "$cache/apt-archives" "$root/var/cache/apt/archives"

# The subset: model, tokenizer, engine and C API tests, and only the targets they run.
targets="test_model_gguf test_model_real tokenizer_unit_test tokenizer_golden_test engine_test
         make_capi_model test_capi ember-c-api make_capi_rerank_model test_capi_rerank"
tests='^(test_model_gguf|test_model_real|tokenizer_unit_test|tokenizer_golden_test|engine_test|capi_.*)$'

note "running scripts/demo.sh --max-tokens 8, then scripts/test.sh -R '$tests' in $root"
status=0
chroot "$root" /usr/bin/env -i HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 TERM=dumb "${passed_env[@]}" EMBER_BUILD_TARGETS="$targets" \
  /bin/bash -c "cd /ember && scripts/demo.sh --max-tokens 8 </dev/null && scripts/test.sh -R '$tests'" \
  >>"$log" 2>&1 || status=$?

elapsed=$(( $(date +%s) - start ))
{
  echo "---- summary"
  grep -h "^install-deps: installing" "$log" || echo "install-deps installed nothing"
  grep -h "tokens/s\|\[length\]\|\[stop\]" "$log" | tail -n 2 || true
  grep -h "tests passed\|tests failed" "$log" | tail -n 1 || true
  echo "check-fresh-machine: $( ((status == 0)) && echo passed || echo "FAILED (exit $status)") in ${elapsed} s"
} | tee -a "$log.summary" >&2
cat "$log.summary" >>"$log" && rm -f "$log.summary"
exit "$status"
