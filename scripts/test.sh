#!/usr/bin/env bash
# Installs what is missing, builds, checks formatting and runs every test: unit and
# integration tests (real daemons on loopback) through ctest.
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

echo "== unit and integration tests"
cd build
ctest -j2 --output-on-failure --timeout 300
