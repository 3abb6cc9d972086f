#!/usr/bin/env bash
# Installs the Debian 12 packages hcpsim builds against (the CUDA toolkit, if any, is expected at /usr/local/cuda).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y --no-install-recommends \
  build-essential cmake ninja-build git ca-certificates python3 \
  libeigen3-dev libboost-graph-dev catch2 libhdf5-dev hdf5-tools libyaml-cpp-dev \
  libcli11-dev nlohmann-json3-dev libfmt-dev libxml2-utils librsvg2-bin fonts-dejavu-core
