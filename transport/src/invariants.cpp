#include "hoprelay/transport/invariants.h"

#include <array>
#include <atomic>
#include <bit>

#include "hoprelay/transport/log.h"

namespace hoprelay::transport {

namespace {

std::array<std::atomic<uint64_t>, static_cast<size_t>(Invariant::kCount)> g_violations{};

}  // namespace

void report_invariant(Invariant which, std::string_view where) {
  const auto i = static_cast<size_t>(which);
  const uint64_t n = g_violations[i].fetch_add(1, std::memory_order_relaxed) + 1;
  if (!std::has_single_bit(n)) return;
  static auto logger = module_logger("invariants");
  logger->error(
      "internal error ({}, {} so far in this process): {}; carrying on without it. Please "
      "report it with this log: it is a bug in hoprelay, not a peer's fault",
      kInvariantNames[i], n, where);
}

uint64_t invariant_violations(Invariant which) {
  return g_violations[static_cast<size_t>(which)].load(std::memory_order_relaxed);
}

}  // namespace hoprelay::transport
