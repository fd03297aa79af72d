#!/usr/bin/env bash
# Installs the system packages ember builds with, when any is missing (Debian/Ubuntu, as root
# or through sudo). Prints nothing when everything is there.
set -euo pipefail

packages=(build-essential cmake ninja-build python3 python3-venv
          libdnnl-dev libeigen3-dev libfmt-dev doctest-dev libbenchmark-dev
          nlohmann-json3-dev libcpp-httplib-dev curl)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

sudo=""
[[ $(id -u) -ne 0 ]] && sudo=sudo
echo "install-deps: installing ${missing[*]}" >&2
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
