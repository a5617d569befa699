#!/usr/bin/env bash
# ctest client.old_header: an application built against libhoprelay 1.5's client.h runs with
# this library (client.h, "Versioning"). Takes the 1.5 header from the repository's history
# (the commit that made 1.5), builds tests/client/old_header.c against it with the plain
# compiler, checks that the program binds the symbols 1.5 had (the calls that fill 1.0's
# structs, not 1.9's sized ones), and runs it: byte-equal messages, stats, and nothing written
# past the structs of 1.5.
#   tests/client/old_header.sh SOURCE_DIR LIBHOPRELAY_SO
set -euo pipefail
src=$1
lib=$2
commit=a29a923 # "libhoprelay 1.5: reserve takes messages larger than a slot"
work=$(mktemp -d /tmp/hoprelay-old-header.XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "FAIL: $*"
  exit 1
}

mkdir -p "$work/include/hoprelay"
git -C "$src" show "$commit:client/include/hoprelay/client.h" >"$work/include/hoprelay/client.h" ||
  fail "$src has no commit $commit: this test needs the repository's history (a full git clone)"
grep -q "HOPRELAY_CLIENT_VERSION_MINOR 5$" "$work/include/hoprelay/client.h" ||
  fail "client.h of $commit is not 1.5's"

libdir=$(dirname "$lib")
cc -std=c99 -D_POSIX_C_SOURCE=200809L -Wall -Werror -I"$work/include" \
  "$src/tests/client/old_header.c" -L"$libdir" -lhoprelay "-Wl,-rpath,$libdir" -o "$work/old_header" ||
  fail "tests/client/old_header.c does not build against 1.5's header"
symbols=$(objdump -T "$work/old_header")
for s in hoprelay_consumer_recv hoprelay_producer_stats; do
  grep -Eq "\(?HOPRELAY_1\.0\)? +$s\$" <<<"$symbols" || fail "the program does not bind $s@HOPRELAY_1.0"
done
if grep -q "_sized" <<<"$symbols"; then fail "a program of 1.5's header binds a 1.9 symbol"; fi

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$work/old_header" "$port" 3000
