#!/bin/bash
# Builds the .debs with cpack (hoprelay, libhoprelay1, libhoprelay-dev, python3-hoprelay),
# installs them into a scratch root (dpkg -x: no change to this machine), runs `hoprelay
# validate` from it on the example topology it ships, and builds the client examples against
# the installed library with pkg-config only, then runs producer -> a -> b -> consumer with the
# installed daemon (messages of 20000, 1000 and 0 bytes).
#   test_deb.sh BUILD_DIR
set -euo pipefail
# (`grep -q` reads a command's whole output from a here-string, not a pipe: it stops at its
# match, and under pipefail the SIGPIPE the writer may then get would count as a failure.)
BUILD=$(cd "${1:?usage: test_deb.sh BUILD_DIR}" && pwd -P)
fail() { echo "test_deb: FAIL: $*" >&2; exit 1; }

cd "$BUILD"
# The cluster suite builds the packages in this directory too: one at a time.
exec 9>"$BUILD/.cpack.lock"
flock -w 600 9 || fail "timed out waiting for $BUILD/.cpack.lock"
rm -f ./*.deb ./*.ddeb
cpack -G DEB >cpack.log 2>&1 || { cat cpack.log; fail "cpack -G DEB failed"; }
deb=$(ls hoprelay_*.deb)
echo "built $(ls ./*.deb | xargs -n1 basename | tr '\n' ' ')"
for p in libhoprelay1 libhoprelay-dev python3-hoprelay; do
  [[ -f $(ls ${p}_*.deb 2>/dev/null | head -1) ]] || fail "no $p package"
done
[[ $(dpkg-deb -f "$deb" Depends) == *"libhoprelay1 (= "* ]] || fail "hoprelay does not depend on libhoprelay1"
[[ $(dpkg-deb -f libhoprelay-dev_*.deb Depends) == *"libhoprelay1 (= "* ]] ||
  fail "libhoprelay-dev does not depend on libhoprelay1"
dpkg-deb --ctrl-tarfile libhoprelay1_*.deb | tar -t | grep shlibs >/dev/null || fail "libhoprelay1 has no shlibs"

# Declared dependencies: found by dpkg-shlibdeps, plus the providers and systemd.
depends=$(dpkg-deb -f "$deb" Depends)
echo "Depends: $depends"
for want in libibverbs1 librdmacm1 libspdlog1 libprometheus-cpp-pull libsystemd0 libzstd1 \
  ibverbs-providers systemd; do
  [[ $depends == *"$want"* ]] || fail "Depends lacks $want"
done

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
for d in ./*.deb; do dpkg -x "$d" "$root"; done
arch=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -print-multiarch)
for f in "usr/lib/$arch/libhoprelay.so.1" "usr/lib/$arch/libhoprelay.so" \
  "usr/lib/$arch/pkgconfig/hoprelay.pc" usr/include/hoprelay/client.h \
  usr/include/hoprelay/client.hpp usr/lib/python3/dist-packages/hoprelay/__init__.py; do
  [[ -e $root/$f ]] || fail "$f missing from the packages"
done
# The library's file carries the header's ABI version (libhoprelay.so.MAJOR.MINOR.0).
abi=$(awk '/^#define HOPRELAY_CLIENT_VERSION_(MAJOR|MINOR) / {printf "%s%s", sep, $3; sep = "."}' \
  "$root/usr/include/hoprelay/client.h")
[[ $(readlink "$root/usr/lib/$arch/libhoprelay.so.1") == "libhoprelay.so.$abi.0" ]] ||
  fail "libhoprelay.so.1 points at $(readlink "$root/usr/lib/$arch/libhoprelay.so.1"), not libhoprelay.so.$abi.0 (ABI $abi)"
exported=$(nm -D --defined-only "$root/usr/lib/$arch/libhoprelay.so.1" | awk '$2 == "T" {print $3}' |
  grep -vc '^hoprelay_' || true)
[[ $exported == 0 ]] || fail "libhoprelay exports $exported symbols outside hoprelay_*"
for f in usr/bin/hoprelay usr/sbin/hoprelayd usr/lib/systemd/system/hoprelayd@.service \
  usr/lib/sysusers.d/hoprelay.conf usr/share/doc/hoprelay/operations.md \
  usr/share/doc/hoprelay/hoprelay-alerts.yml usr/share/doc/hoprelay/examples/demo.toml \
  usr/include/hoprelay/stage_abi.h; do
  [[ -e $root/$f ]] || fail "$f missing from the package"
done
[[ -d $root/etc/hoprelay ]] || fail "/etc/hoprelay missing"
[[ -z $(ls -A "$root/etc/hoprelay") ]] || fail "/etc/hoprelay is not empty"
control=$(dpkg-deb --ctrl-tarfile "$deb" | tar -tv)
for script in postinst prerm postrm; do
  grep -q "^-rwxr-xr-x .* ./$script$" <<<"$control" || fail "no $script (0755) in $deb"
done
pycontrol=$(dpkg-deb --ctrl-tarfile python3-hoprelay_*.deb | tar -tv)
for script in postinst prerm; do
  grep -q "^-rwxr-xr-x .* ./$script$" <<<"$pycontrol" || fail "no $script (0755) in python3-hoprelay"
done

# The maintainer scripts, run for each argument dpkg passes them, against a scratch root: their
# absolute paths are rewritten into it (a path added to a script must be added here), and
# systemctl, systemd-sysusers, py3compile, py3clean, userdel and groupdel are stubs that log
# their arguments (getent one that finds the account). Nothing on this host changes.
ms=$root/maintainer-scripts
mkdir -p "$ms/bin" "$ms/root/etc/systemd/system/multi-user.target.wants" "$ms/root/var/lib/hoprelay"
for tool in systemctl systemd-sysusers py3compile py3clean userdel groupdel; do
  printf '#!/bin/sh\necho "%s $*" >>"%s/log"\n' "$tool" "$ms" >"$ms/bin/$tool"
done
# The account exists, as after any install (getent answers, and is not recorded).
printf '#!/bin/sh\necho "$2:x:999:999::/var/lib/hoprelay:/usr/sbin/nologin"\n' >"$ms/bin/getent"
chmod 0755 "$ms/bin/"*
for p in hoprelay python3-hoprelay; do
  dpkg-deb -e "$(ls ${p}_*.deb)" "$ms/$p"
  sed -i -E "s#(/run/systemd/system|/etc/systemd|/var/lib/hoprelay|/usr/lib/python3)#$ms/root\1#g" \
    "$ms/$p/"p*
done
# run PACKAGE SCRIPT ARGS...: runs it as dpkg would; $did is then what the stubs were asked.
run() {
  last="$1 $2 ${*:3}"
  : >"$ms/log"
  PATH="$ms/bin:$PATH" "$ms/$1/$2" "${@:3}" >"$ms/out" 2>&1 || fail "$last: $(cat "$ms/out")"
  did=$(cat "$ms/log")
}
expect() { [[ $did == "$1" ]] || fail "$last did [${did//$'\n'/; }], not [${1//$'\n'/; }]"; }
wants=$ms/root/etc/systemd/system/multi-user.target.wants
mkdir -p "$ms/root/run/systemd/system"
run hoprelay postinst configure
expect $'systemd-sysusers hoprelay.conf\nsystemctl daemon-reload'
# An upgrade restarts the running nodes without waiting for them to be ready (which may be never).
run hoprelay postinst configure 0.0.9-1
expect $'systemd-sysusers hoprelay.conf\nsystemctl daemon-reload\nsystemctl --no-block try-restart hoprelayd@*.service'
run hoprelay prerm upgrade 0.2.0-1
expect ""
run hoprelay prerm remove
expect "systemctl stop hoprelayd@*.service"
ln -s /usr/lib/systemd/system/hoprelayd@.service "$wants/hoprelayd@b.service"
ln -s /usr/lib/systemd/system/other.service "$wants/other.service"
touch "$ms/root/var/lib/hoprelay/c1.records"
run hoprelay postrm remove
expect "systemctl daemon-reload"
[[ -L $wants/hoprelayd@b.service && -f $ms/root/var/lib/hoprelay/c1.records ]] ||
  fail "postrm remove removed an enablement link or the state"
# Purge: the links and the state go, the account stays (its uid is not given to another).
run hoprelay postrm purge
expect "systemctl daemon-reload"
[[ ! -e $wants/hoprelayd@b.service && ! -e $ms/root/var/lib/hoprelay ]] ||
  fail "postrm purge left an enablement link or /var/lib/hoprelay"
[[ -L $wants/other.service ]] || fail "postrm purge removed another unit's enablement link"
run hoprelay postrm purge
expect "systemctl daemon-reload"
for args in "postinst abort-upgrade 0.2.0-1" "postinst abort-remove" "postinst abort-deconfigure" \
  "prerm failed-upgrade 0.0.9-1" "prerm deconfigure" "postrm upgrade 0.2.0-1" \
  "postrm failed-upgrade 0.0.9-1" "postrm abort-install" "postrm abort-upgrade 0.0.9-1" \
  "postrm disappear hoprelay-ng 1.0-1"; do
  run hoprelay $args
  expect ""
done
# Without systemd running (a chroot, an image build): the account, and no systemctl.
rmdir "$ms/root/run/systemd/system"
run hoprelay postinst configure 0.0.9-1
expect "systemd-sysusers hoprelay.conf"
run hoprelay prerm remove
expect ""
run python3-hoprelay postinst configure
expect "py3compile -p python3-hoprelay"
run python3-hoprelay prerm remove
expect "py3clean -p python3-hoprelay"
rm -rf "$ms"
# Debian's per-package documentation, and the completion for both commands.
for p in hoprelay libhoprelay1 libhoprelay-dev python3-hoprelay; do
  grep -q '^Format: https://www.debian.org/doc/packaging-manuals/copyright-format/1.0/' \
    "$root/usr/share/doc/$p/copyright" || fail "$p: no DEP-5 /usr/share/doc/$p/copyright"
  gzip -t "$root/usr/share/doc/$p/changelog.Debian.gz" || fail "$p: no changelog.Debian.gz"
done
for c in hoprelay hoprelayd; do
  grep -q "^complete .* $c$" "$root/usr/share/bash-completion/completions/$c" ||
    fail "no bash completion for $c"
done
# Stripped binaries, their symbols in the -dbgsym packages under their build ids.
dbg=$(mktemp -d)
for p in hoprelay libhoprelay1; do
  ddeb=$(ls ${p}-dbgsym_*.ddeb 2>/dev/null | head -1)
  [[ -f $ddeb ]] || fail "no ${p}-dbgsym package"
  dpkg-deb -x "$ddeb" "$dbg"
done
for f in usr/sbin/hoprelayd usr/bin/hoprelay "usr/lib/$arch/libhoprelay.so.1"; do
  ! grep -q '\.debug_info' <<<"$(readelf -S "$root/$f")" || fail "$f is not stripped (it has .debug_info)"
  id=$(readelf -n "$root/$f" | awk '/Build ID:/ {print $3}')
  [[ -n $id ]] || fail "$f has no build id"
  [[ -f $dbg/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug ]] ||
    fail "$f: no /usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug in the -dbgsym packages"
done
rm -rf "$dbg"
size=$(dpkg-deb -f "$deb" Installed-Size)
# A sanitized build (scripts/test.sh's ASan phase) is stripped too (checked above), but its
# instrumented code alone is larger than the limit.
if ! grep -q '^HOPRELAY_SANITIZE:BOOL=ON' "$BUILD/CMakeCache.txt"; then
  ((size < 15000)) || fail "hoprelay installs $size KiB: are the binaries stripped?"
fi
# lintian: no errors (E:) in any package; the warnings are listed and answered in
# docs/operations.md, "The package".
if command -v lintian >/dev/null; then
  lintian --tag-display-limit 0 ./*.deb ./*.ddeb >lintian.log 2>&1 || true
  cat lintian.log
  ! grep -q '^E: ' lintian.log || fail "lintian reports errors (above, and in $BUILD/lintian.log)"
elif [[ ${CI:-} == true ]]; then
  fail "lintian is not installed (scripts/install-deps.sh installs it)"
else
  echo "test_deb: lintian not installed: skipping its check (scripts/install-deps.sh installs it)"
fi

# The installed binaries run, and validate what the package ships (the CLI links the
# package's libhoprelay: a scratch root is not on the loader's path).
export LD_LIBRARY_PATH=$(dirname "$(find "$root" -name 'libhoprelay.so.1' | head -1)")
out=$("$root/usr/bin/hoprelay" validate "$root/usr/share/doc/hoprelay/examples/demo.toml")
[[ $out == "ok: pipeline \"demo\", 3 nodes, 2 links, messages up to 4194048 bytes" ]] || fail "validate said: $out"
"$root/usr/sbin/hoprelayd" --help >/dev/null || fail "hoprelayd --help"
grep -q '^hoprelayd 0\.1\.0$' <<<"$("$root/usr/sbin/hoprelayd" --version)" || fail "hoprelayd --version"
# The unit points at the installed paths.
grep -q '^ExecStart=/usr/sbin/hoprelayd ' "$root/usr/lib/systemd/system/hoprelayd@.service" ||
  fail "unit ExecStart does not point at /usr/sbin/hoprelayd"

# An application's build: pkg-config finds the installed library (the scratch root stands for /).
# (pkg-config drops -I/usr/include as a system path before adding the sysroot: keep it.)
export PKG_CONFIG_SYSROOT_DIR=$root PKG_CONFIG_LIBDIR=$root/usr/lib/$arch/pkgconfig
export PKG_CONFIG_ALLOW_SYSTEM_CFLAGS=1 PKG_CONFIG_ALLOW_SYSTEM_LIBS=1
flags=$(pkg-config --cflags --libs hoprelay) || fail "pkg-config hoprelay"
# Its version is the library's ABI (client.h), so that `--atleast-version` checks work.
abi=$(awk '/^#define HOPRELAY_CLIENT_VERSION_(MAJOR|MINOR) / {v = v (v == "" ? "" : ".") $3}
           END {print v ".0"}' "$root/usr/include/hoprelay/client.h")
[[ $(pkg-config --modversion hoprelay) == "$abi" ]] ||
  fail "pkg-config --modversion hoprelay: $(pkg-config --modversion hoprelay), want $abi"
pkg-config --atleast-version="${abi%.0}" hoprelay || fail "pkg-config --atleast-version=${abi%.0}"
ex=$root/usr/share/doc/libhoprelay-dev/examples
# A sanitized build's library (scripts/test.sh, build-asan) needs its runtime in the program.
if grep -q libasan <<<"$(ldd "$root/usr/lib/$arch/libhoprelay.so.1")"; then
  flags="-fsanitize=address,undefined $flags"
fi
cc -Wall -Werror "$ex/producer.c" $flags -o "$root/producer" || fail "examples/producer.c does not build"
c++ -std=c++20 -Wall -Werror "$ex/consumer.cpp" $flags -o "$root/consumer" ||
  fail "examples/consumer.cpp does not build"

# producer -> a -> b -> consumer (leaf c), the daemons from the package, TCP on loopback.
base=$((20000 + $$ % 20000))
cat >"$root/t.toml" <<T
[pipeline]
name = "pkg"
transport = "tcp"
slot_size = "16KiB"
slots = 32
[nodes.a]
listen = "127.0.0.1:$base"
downstream = ["b"]
[nodes.b]
listen = "127.0.0.1:$((base + 1))"
downstream = ["c"]
[nodes.c]
listen = "127.0.0.1:$((base + 2))"
T
"$root/usr/sbin/hoprelayd" -t "$root/t.toml" -n b 2>"$root/b.log" &
bpid=$!
"$root/usr/sbin/hoprelayd" -t "$root/t.toml" -n a 2>"$root/a.log" &
apid=$!
trap 'kill $apid $bpid 2>/dev/null; rm -rf "$root"' EXIT
"$root/consumer" "$root/t.toml" c >"$root/consumer.out" 2>&1 &
cpid=$!
# 5000 messages of 20000 bytes: larger than a slot, so every one travels as two chunks.
timeout 120 "$root/producer" "$root/t.toml" a 5000 20000 || fail "producer: $(cat "$root/a.log")"
wait $cpid || fail "consumer: $(cat "$root/consumer.out")"
grep -q "consumer: 5000 messages, 100000000 bytes, 0 corrupt, 0 out of order" "$root/consumer.out" ||
  fail "consumer said: $(cat "$root/consumer.out")"
timeout 120 "$root/producer" "$root/t.toml" a 3000 1000 >/dev/null &
ppid=$!
"$root/consumer" "$root/t.toml" c >"$root/consumer.out" 2>&1 || fail "consumer: $(cat "$root/consumer.out")"
wait $ppid || fail "second producer"
grep -q "consumer: 3000 messages, 3000000 bytes, 0 corrupt, 0 out of order" "$root/consumer.out" ||
  fail "consumer said: $(cat "$root/consumer.out")"
# Empty messages: send takes 0 bytes (reserve does not), and the stream still ends.
timeout 120 "$root/producer" "$root/t.toml" a 10 0 >"$root/producer.out" 2>&1 &
ppid=$!
"$root/consumer" "$root/t.toml" c >"$root/consumer.out" 2>&1 || fail "consumer: $(cat "$root/consumer.out")"
wait $ppid || fail "producer of empty messages: $(cat "$root/producer.out")"
grep -qx "producer: origin [0-9]* sent 10 messages" "$root/producer.out" ||
  fail "producer said: $(cat "$root/producer.out")"
grep -qx "consumer: 10 messages, 0 bytes, 0 corrupt, 0 out of order" "$root/consumer.out" ||
  fail "consumer said: $(cat "$root/consumer.out")"
# Python finds the installed module (not with a sanitized library: python3 is not).
if ! grep -q libasan <<<"$(ldd "$root/usr/lib/$arch/libhoprelay.so.1")"; then
  PYTHONPATH=$root/usr/lib/python3/dist-packages HOPRELAY_LIBRARY=$root/usr/lib/$arch/libhoprelay.so.1 \
    python3 -c "import hoprelay" || fail "python3 cannot import the installed hoprelay module"
fi
# Installed from the build tree under a prefix of one's own: the .pc names that prefix, and
# the topology directory is under it too (not the host's /etc).
pfx=$root/prefix
cmake --install "$BUILD" --prefix "$pfx" >/dev/null || fail "cmake --install --prefix"
grep -qx "prefix=$pfx" "$pfx/lib/$arch/pkgconfig/hoprelay.pc" ||
  fail "hoprelay.pc under --prefix $pfx says: $(head -1 "$pfx/lib/$arch/pkgconfig/hoprelay.pc")"
[[ -d $pfx/etc/hoprelay ]] || fail "cmake --install --prefix $pfx made no $pfx/etc/hoprelay"
# A venv pointed at that prefix as docs/client.md says (a .pth file naming hoprelay.pc's
# pythondir) imports the module, which loads that prefix's library: no PYTHONPATH, no
# HOPRELAY_LIBRARY, no LD_LIBRARY_PATH.
if ! grep -q libasan <<<"$(ldd "$pfx/lib/$arch/libhoprelay.so.1")"; then
  python3 -m venv --without-pip "$root/venv" || fail "python3 -m venv"
  site=$("$root/venv/bin/python" -c 'import site; print(site.getsitepackages()[0])')
  PKG_CONFIG_PATH=$pfx/lib/$arch/pkgconfig pkg-config --variable=pythondir hoprelay >"$site/hoprelay.pth"
  loaded=$(env -u PYTHONPATH -u HOPRELAY_LIBRARY -u LD_LIBRARY_PATH "$root/venv/bin/python" -c \
    'import hoprelay; print(hoprelay.library_path, hoprelay.version())') ||
    fail "a venv with hoprelay.pth ($(cat "$site/hoprelay.pth")) cannot import hoprelay"
  [[ $loaded == "$pfx/lib/$arch/libhoprelay.so.1 (1, "* ]] ||
    fail "the venv's hoprelay loaded $loaded, not $pfx's library"
fi
echo "test_deb: package $deb installs and validates its example: $out; examples built with pkg-config: 5000 + 3000 + 10 empty messages producer -> a -> b -> consumer, 0 corrupt"
