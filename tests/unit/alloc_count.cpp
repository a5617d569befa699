// The replaceable global allocation functions ([new.delete]), counting, over malloc and free.
// The nothrow forms too: every form that pairs with these deletes must come from malloc (the
// sanitizers' own operator new would not match a free). The aligned forms are left to the
// library, new and delete alike: nothing the counted tests run uses over-aligned types.
#include "alloc_count.h"

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>

namespace {

std::atomic<uint64_t> g_allocations{0};
std::atomic<bool> g_trace{false};
thread_local bool t_tracing = false;  // backtrace() may allocate (its first call loads libgcc)

void trace() {
  if (!g_trace.load(std::memory_order_relaxed) || t_tracing) return;
  t_tracing = true;
  void* frames[32];
  const int n = backtrace(frames, 32);
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  (void)!write(STDERR_FILENO, "--\n", 3);
  t_tracing = false;
}

void* counted(std::size_t size) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  trace();
  if (void* p = std::malloc(size == 0 ? 1 : size)) return p;
  throw std::bad_alloc();
}

}  // namespace

namespace hoprelay::test {

uint64_t allocations() {
  return g_allocations.load(std::memory_order_relaxed);
}

void trace_allocations(bool on) {
  g_trace.store(on, std::memory_order_relaxed);
}

}  // namespace hoprelay::test

void* operator new(std::size_t size) {
  return counted(size);
}
void* operator new[](std::size_t size) {
  return counted(size);
}
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  trace();
  return std::malloc(size == 0 ? 1 : size);
}
void* operator new[](std::size_t size, const std::nothrow_t& t) noexcept {
  return operator new(size, t);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
