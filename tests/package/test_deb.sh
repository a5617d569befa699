#!/bin/bash
# Builds the .deb with cpack, installs it into a scratch root (dpkg -x: no change to this
# machine) and runs `hoprelay validate` from it on the example topology it ships.
#   test_deb.sh BUILD_DIR
set -euo pipefail
BUILD=$(cd "${1:?usage: test_deb.sh BUILD_DIR}" && pwd -P)
fail() { echo "test_deb: FAIL: $*" >&2; exit 1; }

cd "$BUILD"
rm -f hoprelay_*.deb
cpack -G DEB >cpack.log 2>&1 || { cat cpack.log; fail "cpack -G DEB failed"; }
deb=$(ls hoprelay_*.deb)
echo "built $deb"

# Declared dependencies: found by dpkg-shlibdeps, plus the providers and systemd.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for want in libibverbs1 librdmacm1 libspdlog1 libprometheus-cpp-pull libsystemd0 \
  ibverbs-providers systemd; do
  [[ $depends == *"$want"* ]] || fail "Depends lacks $want"
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
dpkg -x "$deb" "$root"
for f in usr/bin/hoprelay usr/sbin/hoprelayd usr/lib/systemd/system/hoprelayd@.service \
  usr/lib/sysusers.d/hoprelay.conf usr/share/doc/hoprelay/operations.md \
  usr/share/doc/hoprelay/hoprelay-alerts.yml usr/share/doc/hoprelay/examples/demo.toml \
  usr/include/hoprelay/stage_abi.h; do
  [[ -e $root/$f ]] || fail "$f missing from the package"
done
[[ -d $root/etc/hoprelay ]] || fail "/etc/hoprelay missing"
[[ -z $(ls -A "$root/etc/hoprelay") ]] || fail "/etc/hoprelay is not empty"
dpkg-deb --ctrl-tarfile "$deb" | tar -t | grep -q postinst || fail "no postinst"

# The installed binaries run, and validate what the package ships (the CLI links the
# package's libhoprelay: a scratch root is not on the loader's path).
export LD_LIBRARY_PATH=$(dirname "$(find "$root" -name 'libhoprelay.so.1' | head -1)")
out=$("$root/usr/bin/hoprelay" validate "$root/usr/share/doc/hoprelay/examples/demo.toml")
[[ $out == "ok: 3 nodes, 2 links, messages up to 4194304 bytes" ]] || fail "validate said: $out"
"$root/usr/sbin/hoprelayd" --help >/dev/null || fail "hoprelayd --help"
# The unit points at the installed paths.
grep -q '^ExecStart=/usr/sbin/hoprelayd ' "$root/usr/lib/systemd/system/hoprelayd@.service" ||
  fail "unit ExecStart does not point at /usr/sbin/hoprelayd"
echo "test_deb: package $deb installs and validates its example: $out"
