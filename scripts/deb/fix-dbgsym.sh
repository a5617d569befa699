#!/bin/bash
# Finishes the -dbgsym packages that cpack (CMake 3.25) builds: its md5sums name the files by
# their build-tree paths (lintian: md5sums-lists-nonexistent-file), and they lack the
# /usr/share/doc/PACKAGE (copyright, changelog) every Debian package carries. Rebuilds each
# .ddeb with both fixed.
#   fix-dbgsym.sh DDEB...
set -euo pipefail
for ddeb in "$@"; do
  work=$(mktemp -d)
  dpkg-deb -R "$ddeb" "$work"
  pkg=$(sed -n 's/^Package: //p' "$work/DEBIAN/control")
  # As dh_strip does: the documentation directory is a link to that of the package whose
  # symbols these are (a debug package may hold nothing but debug files).
  mkdir -p "$work/usr/share/doc"
  ln -s "${pkg%-dbgsym}" "$work/usr/share/doc/$pkg"
  (cd "$work" && find usr -type f -printf '%P\n' | sort | sed 's|^|usr/|' | xargs md5sum) \
    >"$work/DEBIAN/md5sums"
  chmod 0644 "$work/DEBIAN/md5sums"
  dpkg-deb --root-owner-group -Zxz -b "$work" "$ddeb" >/dev/null
  rm -rf "$work"
done
