#!/usr/bin/env bash
# Installs what is missing, builds, checks formatting and runs every test through ctest: unit
# tests, integration tests (real daemons on loopback) and the verbs suite on Soft-RoCE in a VM.
set -euo pipefail
cd "$(dirname "$0")/.."

./scripts/install-deps.sh
./scripts/build.sh

echo "== clang-format"
bad=$(git ls-files '*.cpp' '*.h' '*.c' | xargs clang-format --dry-run -Werror 2>&1 | grep -c "error:" || true)
if [[ "$bad" != 0 ]]; then
  git ls-files '*.cpp' '*.h' '*.c' | xargs clang-format --dry-run -Werror 2>&1 | grep "error:" | head -20
  echo "clang-format: $bad places differ; run: git ls-files '*.cpp' '*.h' '*.c' | xargs clang-format -i"
  exit 1
fi

echo "== unit, integration and Soft-RoCE (verbs) tests"
cd build
ctest -j2 --output-on-failure --timeout 1000
# The Soft-RoCE suite's benchmark is a report, not an assertion: show it.
if [[ -f rxe-share/suite/bench.txt ]]; then
  echo "== Soft-RoCE benchmark (same VM run)"
  cat rxe-share/suite/bench.txt
fi
