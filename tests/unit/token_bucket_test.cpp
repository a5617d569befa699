#include "hoprelay/common/token_bucket.h"

#include <gtest/gtest.h>

namespace hoprelay {
namespace {

constexpr uint64_t kMs = 1'000'000;

// Frames sent as soon as the bucket allows them, for a simulated second: the bytes that went
// are the rate's, to the frame, whatever the frame size (whole frames, no rounding that adds
// up).
TEST(TokenBucket, AFullLinkGetsTheRateToTheFrame) {
  for (uint64_t frame : {uint64_t{1}, uint64_t{1000}, uint64_t{65536 + 32}, uint64_t{1} << 20}) {
    TokenBucket b(100'000'000, 5 * kMs);  // 100 Mbit/s: 12.5 MB a second
    uint64_t now = 1'000'000'000, sent = 0;
    const uint64_t end = now + 1'000'000'000;
    while (now < end) {
      if (b.may_take(now)) {
        b.take(frame, now);
        sent += frame;
      } else {
        now += b.wait_ns(now);  // a timer that fires exactly on time
      }
    }
    // A second's worth, plus the burst an idle link may send at once (5 ms: 62,500 bytes),
    // plus the frame that went last: never more, and less by at most one frame.
    EXPECT_LE(sent, 12'500'000u + 62'500u + frame) << frame;
    EXPECT_GE(sent + frame, 12'500'000u + 62'500u) << frame;
  }
}

TEST(TokenBucket, AFrameLargerThanTheBurstGoesWholeAndTheNextWaitsForIt) {
  TokenBucket b(8'000'000, 1 * kMs);  // 1 MB/s: a byte a microsecond
  EXPECT_TRUE(b.may_take(0));
  b.take(100'000, 0);  // 100 ms of the rate
  EXPECT_FALSE(b.may_take(50 * kMs));
  EXPECT_EQ(b.wait_ns(50 * kMs), 49 * kMs);  // until 1 ms before it is paid for
  EXPECT_TRUE(b.may_take(99 * kMs));
  EXPECT_EQ(b.ns_for(1), 1000u);
}

TEST(TokenBucket, AnIdleLinkSavesNoMoreThanTheBurst) {
  TokenBucket b(8'000'000, 2 * kMs);  // 1 MB/s, 2 ms: 2,000 bytes ahead at most
  uint64_t now = 10'000 * kMs;        // idle for ten seconds
  uint64_t sent = 0;
  while (b.may_take(now)) {
    b.take(100, now);
    sent += 100;
  }
  EXPECT_EQ(sent, 2'100u);  // the burst, and the frame that went at its edge
}

// A late timer (a busy host) loses no rate while it is later by less than the burst.
TEST(TokenBucket, ALateWakeUpWithinTheBurstLosesNoRate) {
  TokenBucket b(8'000'000, 5 * kMs);
  uint64_t now = 0, sent = 0;
  while (now < 1000 * kMs) {
    while (b.may_take(now)) {
      b.take(1000, now);  // 1 ms of the rate each
      sent += 1000;
    }
    now += b.wait_ns(now) + 4 * kMs;  // every wake-up 4 ms late
  }
  EXPECT_GE(sent, 1'000'000u);
  EXPECT_LE(sent, 1'000'000u + 5'000u + 1000u + 4'000u);
}

}  // namespace
}  // namespace hoprelay
