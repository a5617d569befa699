#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (ASan + UBSan, every library instrumented)
# into ./build-fuzz and runs each for a bounded time, in parallel, starting from the committed
# seeds. Fails when a fuzzer finds a crash, a sanitizer report, a leak, a slow input or one that
# exhausts memory, and prints the reproducer's path. docs/security.md, "Fuzzing and sanitizers".
#
#   scripts/fuzz.sh                                  # every fuzzer, 30 s each
#   FUZZ_SECONDS=3600 scripts/fuzz.sh fuzz_topology  # one fuzzer, longer
#
# Environment: FUZZ_SECONDS (per fuzzer, default 30), FUZZ_BUILD_DIR (default build-fuzz),
# FUZZ_ARGS (extra libFuzzer flags, e.g. "-jobs=2 -workers=2"). The corpus each run grows lives
# in $FUZZ_BUILD_DIR/fuzz-runs/TARGET/corpus and is kept for the next run; the repository's
# seed directories are only read.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
build=$(realpath -m "${FUZZ_BUILD_DIR:-build-fuzz}")
seconds=${FUZZ_SECONDS:-30}

all=(fuzz_topology fuzz_frames)
targets=("$@")
((${#targets[@]})) || targets=("${all[@]}")

# Per-target seeds (read-only) and flags.
declare -A seeds flags
seeds[fuzz_topology]="$root/tests/fuzz/corpus/topology $root/config/examples"
flags[fuzz_topology]="-max_len=8192 -dict=$root/tests/fuzz/topology.dict"
seeds[fuzz_frames]="$root/tests/fuzz/corpus/frames"
flags[fuzz_frames]="-max_len=1024"
for t in "${targets[@]}"; do
  [[ -n "${seeds[$t]:-}" ]] || { echo "fuzz.sh: unknown target $t (have: ${all[*]})" >&2; exit 2; }
done

# A build directory once configured with another compiler starts over.
if [[ -f "$build/CMakeCache.txt" ]] && ! grep -q '^CMAKE_CXX_COMPILER:.*clang' "$build/CMakeCache.txt"; then
  rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
fi
source scripts/ccache-args.sh
cmake -S . -B "$build" -DCMAKE_C_COMPILER=clang -DCMAKE_CXX_COMPILER=clang++ \
  -DCMAKE_BUILD_TYPE=RelWithDebInfo -DHOPRELAY_FUZZ=ON "${ccache_args[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

declare -A pids
for t in "${targets[@]}"; do
  run="$build/fuzz-runs/$t"
  mkdir -p "$run/corpus"
  rm -f "$run"/crash-* "$run"/leak-* "$run"/timeout-* "$run"/oom-* "$run"/slow-unit-*
  # shellcheck disable=SC2086  # word splitting of the flag and directory lists is intended
  (cd "$run" && exec "$build/tests/fuzz/$t" -max_total_time="$seconds" -timeout=10 \
    -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$run/" ${flags[$t]} \
    ${FUZZ_ARGS:-} corpus ${seeds[$t]}) >"$run/log" 2>&1 &
  pids[$t]=$!
done

failed=0
for t in "${targets[@]}"; do
  run="$build/fuzz-runs/$t"
  if wait "${pids[$t]}"; then
    done_line=$(grep -E '^#[0-9]+[[:space:]]+DONE' "$run/log" | tail -n 1 || true)
    echo "$t: ok ($(echo "$done_line" | sed -E 's/^#([0-9]+)[[:space:]]+DONE[[:space:]]+/\1 runs, /'))"
  else
    failed=1
    echo "$t: FAILED; last lines of $run/log:"
    tail -n 60 "$run/log"
    for a in "$run"/crash-* "$run"/leak-* "$run"/timeout-* "$run"/oom-* "$run"/slow-unit-*; do
      [[ -e "$a" ]] && echo "$t: reproducer: $a (run: $build/tests/fuzz/$t $a)"
    done
  fi
done
exit $failed
