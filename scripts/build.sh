#!/usr/bin/env bash
# Configures and builds hoprelay into ./build (or $BUILD_DIR). Extra args go to cmake.
# TARGETS="hoprelayd hoprelay" builds only those targets (and what they need), as the demo does.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
source scripts/ccache-args.sh
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-RelWithDebInfo}" "${ccache_args[@]}" "$@" >/dev/null
read -ra targets <<<"${TARGETS:-}"
cmake --build "$BUILD_DIR" -j "$(nproc)" ${targets[@]:+--target "${targets[@]}"}
