# Sourced by scripts/build.sh and scripts/fuzz.sh: sets `ccache_args`, the CMake options that
# put ccache (scripts/install-deps.sh) in front of the compilers when it is installed, so a
# build recompiles only what changed, also in another clone of the repository (CI builds a
# clean clone, three times: build, build-asan, build-fuzz). Paths below the clone are hashed
# relative to it (base_dir) and the compiler's working directory is left out of the hash
# (hash_dir), so the debug information of a cached object may name the clone that compiled it
# first. Without ccache, or with HOPRELAY_CCACHE=0, nothing changes.
ccache_args=()
if [[ "${HOPRELAY_CCACHE:-1}" != 0 ]] && command -v ccache >/dev/null; then
  launcher="env;CCACHE_BASEDIR=$PWD;CCACHE_NOHASHDIR=1;ccache"
  ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER="$launcher" -DCMAKE_CXX_COMPILER_LAUNCHER="$launcher")
else
  ccache_args=(-DCMAKE_C_COMPILER_LAUNCHER= -DCMAKE_CXX_COMPILER_LAUNCHER=)
fi
