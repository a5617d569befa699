// Counts pthread_mutex_lock calls in the tests' process (lock_count.cpp interposes it): every
// std::mutex, and every spdlog line (its sinks lock), so a test can show that a data path
// neither locks nor logs per message.
#pragma once

#include <cstdint>

namespace hoprelay::test {

// pthread_mutex_lock calls of any thread so far.
uint64_t mutex_locks();

}  // namespace hoprelay::test
