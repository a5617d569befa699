#!/usr/bin/env bash
# Builds hoprelayd and hoprelay of the previous release (the last one without wire negotiation,
# commit 97db411, wire protocol 6) from the repository's history, once, into a cache, and prints
# the directory that holds the two programs and the old libhoprelay.so.1, and in deb/ that
# release's Debian packages hoprelay and libhoprelay1. For compat.previous_release
# (tests/compat/previous_release.sh) and the cluster's rolling upgrade (tests/cluster/cluster.sh,
# upgrade-*); scripts/test.sh runs it before the tests, so that the build does not run beside
# timed tests.
#   scripts/previous-release.sh      (cache: $HOPRELAY_COMPAT_CACHE, default
#                                     /var/cache/hoprelay-compat, else ~/.cache/hoprelay-compat)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
commit=97db411
cache=${HOPRELAY_COMPAT_CACHE:-/var/cache/hoprelay-compat}
if ! { mkdir -p "$cache" 2>/dev/null && [[ -w $cache ]]; }; then
  cache=$HOME/.cache/hoprelay-compat
  mkdir -p "$cache"
fi
old=$cache/$commit
if [[ -x $old/hoprelayd && -x $old/hoprelay && -f $old/libhoprelay.so.1 &&
  -f $old/deb/hoprelay.deb && -f $old/deb/libhoprelay1.deb ]]; then
  echo "$old"
  exit 0
fi
git -C "$src" cat-file -e "$commit^{commit}" 2>/dev/null || {
  echo "previous-release: $src has no commit $commit: a full git clone is needed" >&2
  exit 1
}
work=$(mktemp -d /tmp/hoprelay-previous.XXXXXX)
trap 'rm -rf "$work" "$old.tmp"' EXIT
echo "previous-release: building the release at $commit into $old (once)" >&2
git -C "$src" archive "$commit" | tar -x -C "$work"
# Its own build script and build type (its Release build trips a -Werror GCC 12 warning).
# Installing (cpack) needs only what the two targets build, not the tests.
if ! (cd "$work" && BUILD_DIR="$work/build" TARGETS="hoprelayd hoprelay" ./scripts/build.sh \
  -DCMAKE_SKIP_INSTALL_ALL_DEPENDENCY=ON >"$work/build.log" 2>&1); then
  tail -n 30 "$work/build.log" >&2
  echo "previous-release: the release at $commit does not build" >&2
  exit 1
fi
mkdir -p "$old.tmp"
# hoprelay with its own libhoprelay (run it with LD_LIBRARY_PATH=DIR): an old producer is the
# old library's.
cp "$work/build/daemon/hoprelayd" "$work/build/client/hoprelay" "$old.tmp/"
cp -L "$work/build/client/libhoprelay.so.1" "$old.tmp/"
# Its packages, as that release's `cpack -G DEB` makes them (the daemon's and the library's).
mkdir -p "$old.tmp/deb"
if ! (cd "$work/build" && cpack -G DEB -D CPACK_COMPONENTS_ALL="daemon;lib" >"$work/cpack.log" 2>&1); then
  tail -n 30 "$work/cpack.log" >&2
  echo "previous-release: cpack of the release at $commit failed" >&2
  exit 1
fi
cp "$work"/build/hoprelay_*_amd64.deb "$old.tmp/deb/hoprelay.deb"
cp "$work"/build/libhoprelay1_*_amd64.deb "$old.tmp/deb/libhoprelay1.deb"
rm -rf "$old"
mv "$old.tmp" "$old"
echo "$old"
