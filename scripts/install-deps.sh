#!/usr/bin/env bash
# Installs, from Debian 12 packages only, everything hoprelay needs to build, test and
# run its Soft-RoCE suite. Idempotent: installs only what is missing.
set -euo pipefail

build_pkgs=(
  build-essential cmake pkg-config clang-format curl git
  libspdlog-dev libfmt-dev libtomlplusplus-dev prometheus-cpp-dev libcli11-dev
  libgtest-dev libgmock-dev libibverbs-dev librdmacm-dev libsystemd-dev libcurl4-openssl-dev
  libssl-dev  # libcrypto: HMAC-SHA-256 for auth_key_file; libssl: tls (docs/security.md)
  libzstd-dev  # the built-in zstd stage (docs/stages.md)
  libzmq3-dev  # bench/: the ZeroMQ reference of docs/performance.md
  openmpi-bin libopenmpi-dev  # bench/mpi_bcast.c: the MPI_Bcast reference (mpirun, mpi.h)
  ccache  # scripts/build.sh, scripts/fuzz.sh: recompile only what changed, across clones
)
# Run-time and test tools: the rxe userspace provider, perftest as the verbs reference,
# what the Soft-RoCE VM harness boots (Debian's kernel under qemu, busybox initramfs),
# systemd for systemd-analyze and systemd-sysusers (the unit's tests; systemd need not run),
# and clang with its sanitizer and libFuzzer runtimes (libclang-rt-14-dev) for scripts/fuzz.sh.
test_pkgs=(
  rdma-core ibverbs-providers ibverbs-utils rdmacm-utils perftest
  iproute2 kmod qemu-system-x86 busybox-static python3 systemd
  clang libclang-rt-14-dev
  prometheus  # the server and promtool, for tests/integration/prometheus_test.cpp
  netcat-openbsd  # bench/client.sh: the plain TCP pipe the stream is compared with
  e2fsprogs  # mkfs.ext4: each cluster guest's own disk (tests/cluster)
  graphviz  # dot: README's `hoprelay graph ... | dot -Tpng`, run by integration.Cli.ReadmeGraph*
  lintian  # tests/package/test_deb.sh: no lintian errors in the packages
  zstd  # bench/threads.sh: the zstd command, the reference its zstd relay is measured against
  openssl  # tests/integration/tls_test.cpp: its certificates, and s_client to look at a node
  ucx-utils  # ucx_perftest: UCX's UCT put_bw/am_lat beside perftest in the Soft-RoCE suite
  # mpirun and mpicc: the Soft-RoCE suite tries Open MPI over the rxe device (peers_probe)
  # (openmpi-bin and libopenmpi-dev are build packages too: bench/mpi_bcast.c)
  openmpi-bin libopenmpi-dev
  # bench/fleet.sh: the references a fleet's operator would pick instead of hoprelay: reliable
  # multicast (uftp, uftpd) and a BitTorrent swarm (a tracker, a torrent maker, a client)
  uftp opentracker mktorrent aria2
  # bench/profile_hop.sh: perf to sample a relay, and socat, the plain read()/write() relay
  # its profile is set against
  linux-perf socat
)

want=("${build_pkgs[@]}")
if [[ "${1:-}" != "--build-only" ]]; then want+=("${test_pkgs[@]}"); fi

missing=()
for p in "${want[@]}"; do
  grep -q "install ok installed" <<<"$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null)" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  if [[ $(id -u) -ne 0 ]]; then SUDO=sudo; else SUDO=; fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
