#!/usr/bin/env bash
# Installs what is missing, builds, checks formatting and runs every test through ctest: unit
# tests, integration tests (real daemons on loopback), the verbs suite on Soft-RoCE in a VM and
# the cluster suites (four VMs with systemd, the package and Prometheus, and their rolling
# upgrade from the previous release: tests/cluster).
# Then the unit and integration tests again under ASan + UBSan (build-asan), and the libFuzzer
# targets for a bounded time (scripts/fuzz.sh, build-fuzz). docs/security.md has the details.
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

echo "== shell: no grep -q at the end of a pipe"
# Under pipefail, `CMD | grep -q PAT` fails when grep leaves at its first match while CMD still
# writes (CMD gets SIGPIPE): it failed a CI run once, and can keep a wait loop from ever seeing
# its line. grep reads the whole output instead: grep -q PAT <<<"$(CMD)". Comments are let be.
pipes=$(git grep -n -E '\|\s*grep\s+-[a-zA-Z]*q' -- '*.sh' | grep -v -E '^[^:]+:[0-9]+:\s*#' || true)
if [[ -n "$pipes" ]]; then
  echo "$pipes"
  echo "shell: grep -q reading a pipe (above): write grep -q PAT <<<\"\$(CMD)\" instead"
  exit 1
fi

# compat.previous_release and cluster.upgrade run this release beside the previous one, built from the
# repository's history once into a cache: built here, not beside the timed tests.
echo "== the previous release (scripts/previous-release.sh)"
./scripts/previous-release.sh

echo "== unit, integration and Soft-RoCE (verbs) tests"
(cd build && ctest -j2 --output-on-failure --timeout 1000)
# The Soft-RoCE suite's benchmark is a report, not an assertion: show it.
if [[ -f build/rxe-share/suite/bench.txt ]]; then
  echo "== Soft-RoCE benchmark (same VM run)"
  cat build/rxe-share/suite/bench.txt
fi

# The unit and integration tests again, built with AddressSanitizer + UndefinedBehaviorSanitizer
# into build-asan; the daemons and the CLI they start are the sanitized builds too. ASan reports
# go to files, so that one from a daemon whose exit status a test does not look at fails the run
# as well (GCC's UBSan ignores log_path: it reports on stderr and exits 1). The Soft-RoCE suite
# is left out: sanitized, the emulated VM takes ~3 min instead of ~1, and the suite's fixed
# start-up waits are too short for sanitized daemons (docs/security.md, "Fuzzing and sanitizers").
# So is the cluster suite (tests/cluster): it runs the packaged, unsanitized build. And the
# package test: what the package holds and how it installs does not change with ASan. And the
# previous release beside this one (compat): its wire is what the fuzz targets cover. And the
# profile's smoke run: the chain it samples is bench.smoke's, which runs here.
echo "== unit and integration tests under ASan + UBSan"
# At -O1, as ASan's documentation advises: it compiles in about 70% of the -O2 time (the whole
# build is CI's second longest step on 2 cores) and still finds what -O2 would.
BUILD_DIR=build-asan ./scripts/build.sh -DHOPRELAY_SANITIZE=ON \
  -DCMAKE_C_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG" -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g -DNDEBUG"
reports=$PWD/build-asan/sanitizer-reports
rm -rf "$reports"
mkdir -p "$reports"
asan_ok=1
(
  cd build-asan
  export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:strict_init_order=1:detect_stack_use_after_return=1:strict_string_checks=1:log_path=$reports/asan"
  export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
  ctest -j2 --output-on-failure --timeout 1000 -E '^(rxe|python|cluster|package|fleet|compat)\.|^client\.(quickstart|durable_recipe|old_header)$|^bench\.profile_hop_smoke$'
) || asan_ok=0
if compgen -G "$reports/*" >/dev/null; then
  for f in "$reports"/*; do
    echo "--- sanitizer report $f"
    cat "$f"
  done
  asan_ok=0
fi
if ((!asan_ok)); then
  echo "sanitizer build: tests failed or sanitizer reports above (reports: $reports)"
  exit 1
fi

# libFuzzer: every fuzz target for FUZZ_SECONDS (default 30) each, in parallel.
echo "== fuzzing (scripts/fuzz.sh)"
./scripts/fuzz.sh
