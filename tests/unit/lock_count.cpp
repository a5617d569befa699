// pthread_mutex_lock defined in the executable comes first in symbol lookup, so every call in
// the process (libstdc++'s std::mutex, spdlog, libhoprelay) reaches this one, which counts it
// and calls the next definition (glibc's, or a sanitizer's interceptor).
#include "lock_count.h"

#include <dlfcn.h>
#include <pthread.h>

#include <atomic>

namespace {

std::atomic<uint64_t> g_locks{0};
using LockFn = int (*)(pthread_mutex_t*);
// Looked up at the first call, without a function-local static: its guard may lock.
std::atomic<LockFn> g_next{nullptr};

}  // namespace

namespace hoprelay::test {

uint64_t mutex_locks() {
  return g_locks.load(std::memory_order_relaxed);
}

}  // namespace hoprelay::test

extern "C" int pthread_mutex_lock(pthread_mutex_t* mutex) {
  LockFn next = g_next.load(std::memory_order_acquire);
  if (!next) {
    next = reinterpret_cast<LockFn>(dlsym(RTLD_NEXT, "pthread_mutex_lock"));
    g_next.store(next, std::memory_order_release);
  }
  g_locks.fetch_add(1, std::memory_order_relaxed);
  return next(mutex);
}
