// Doorbell (doorbell.h): two threads that each sleep for the other through a ring of four
// entries, full and empty all the time, lose no wake-up (a lost one hangs the test: ctest's
// timeout fails it) and deliver every number once, in order.
#include "hoprelay/common/doorbell.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <thread>

#include "hoprelay/common/spsc_ring.h"

namespace hoprelay {
namespace {

TEST(Doorbell, TwoThreadsSleepingForEachOtherLoseNoWakeUp) {
  constexpr uint64_t kCount = 200000;
  SpscRing<uint64_t> ring(4);
  Doorbell to_producer, to_consumer;
  std::thread producer([&] {
    for (uint64_t i = 0; i < kCount; ++i) {
      if (!ring.push(i)) to_producer.sleep_until([&] { return ring.push(i); });
      to_consumer.ring();
    }
  });
  uint64_t next = 0;
  bool in_order = true;
  while (next < kCount) {
    uint64_t v = 0;
    if (!ring.pop(v)) to_consumer.sleep_until([&] { return ring.pop(v); });
    to_producer.ring();
    in_order = in_order && v == next;
    ++next;
  }
  producer.join();
  EXPECT_TRUE(in_order);
  EXPECT_EQ(next, kCount);
}

TEST(Doorbell, ARingWithNobodyAsleepChangesNothingAndSleepReturnsWhenReady) {
  Doorbell bell;
  bell.ring();
  int calls = 0;
  bell.sleep_until([&] { return ++calls == 1; });
  EXPECT_EQ(calls, 1) << "ready at once: no sleep";
}

}  // namespace
}  // namespace hoprelay
