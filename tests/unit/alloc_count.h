// Counts the global operator new calls of the unit tests' process (alloc_count.cpp replaces
// it), so a test can show that a data path allocates nothing once it is warm.
#pragma once

#include <cstdint>

namespace hoprelay::test {

// Every operator new (and new[]) of any thread so far.
uint64_t allocations();

}  // namespace hoprelay::test
