#!/usr/bin/env bash
# deps.sh — install the Debian 12 packages het needs to build and test.
# As root it runs apt-get; otherwise it prints the exact command to run.
# Sourced by run.sh and test.sh; safe to run on its own.
set -euo pipefail

HET_PACKAGES=(build-essential cmake pkg-config git
              libpcre2-dev libhwloc-dev libdrm-dev libjansson-dev libmicrohttpd-dev
              libvulkan-dev glslc mesa-vulkan-drivers
              clang libclang-rt-14-dev
              nginx)   # tests/test_serve_nginx.sh (replicas behind a load balancer)

missing=()
for p in "${HET_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
        echo "deps: installing ${missing[*]}" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    else
        echo "deps: missing Debian packages. Run:" >&2
        echo "  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
        exit 1
    fi
fi
