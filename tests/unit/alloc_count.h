// Counts the global operator new calls of the unit tests' process (alloc_count.cpp replaces
// it), so a test can show that a data path allocates nothing once it is warm.
#pragma once

#include <cstdint>

namespace hoprelay::test {

// Every operator new (and new[]) of any thread so far.
uint64_t allocations();

// While on, each allocation also writes its stack to standard error (glibc's backtrace, as
// `binary(+offset)` lines for addr2line): for finding what a count is made of.
void trace_allocations(bool on);

}  // namespace hoprelay::test
