#!/usr/bin/env bash
# run.sh — set everything up on a fresh Debian 12 machine and generate text
# with the bundled model (models/stories260K.gguf). Extra arguments go to
# `hetrun run`, e.g. ./run.sh -p "Lily and Tom" -n 64 --temp 0
set -euo pipefail
cd "$(dirname "$0")"
bash scripts/deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target hetrun >/dev/null
if [ $# -eq 0 ]; then set -- -p "Once upon a time" -n 128; fi
exec ./build/hetrun run "$@"
