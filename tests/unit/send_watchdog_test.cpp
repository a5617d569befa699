// The verbs transport's dead-peer watch (transport/verbs/send_watchdog.h): the logic only; the
// cluster suite's host-crash scenario is the proof that it fails a link to a crashed host.
#include "../../transport/verbs/send_watchdog.h"

#include <gtest/gtest.h>

using hoprelay::transport::verbs::SendWatchdog;

TEST(SendWatchdog, IdleLinkNeverFires) {
  SendWatchdog w;
  for (int i = 0; i < 100; ++i) EXPECT_FALSE(w.tick(3));
}

TEST(SendWatchdog, FiresAfterLimitTicksWithASendOutstandingAndNoCompletion) {
  SendWatchdog w;
  w.posted();
  EXPECT_FALSE(w.tick(3));
  EXPECT_FALSE(w.tick(3));
  EXPECT_TRUE(w.tick(3));
}

TEST(SendWatchdog, AnyCompletionRestartsTheCount) {
  SendWatchdog w;
  w.posted();
  w.posted();
  EXPECT_FALSE(w.tick(3));
  EXPECT_FALSE(w.tick(3));
  w.completed();  // one of two: the peer is alive, merely slow
  EXPECT_FALSE(w.tick(3));
  EXPECT_FALSE(w.tick(3));
  EXPECT_FALSE(w.tick(3));
  EXPECT_TRUE(w.tick(3));
  w.completed();  // all done: nothing outstanding
  for (int i = 0; i < 10; ++i) EXPECT_FALSE(w.tick(3));
}

TEST(SendWatchdog, ResetForgetsOutstandingSends) {
  SendWatchdog w;
  w.posted();
  EXPECT_FALSE(w.tick(2));
  w.reset();
  for (int i = 0; i < 5; ++i) EXPECT_FALSE(w.tick(2));
}
