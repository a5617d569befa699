#include "hoprelay/daemon/partials.h"

#include <gtest/gtest.h>

#include <vector>

#include "hoprelay/daemon/ring_queue.h"

namespace hoprelay::daemon {
namespace {

TEST(Partials, OneEntryPerMessageFoundAgainUntilClosed) {
  PartialTable t;
  EXPECT_EQ(t.find(1, 10), nullptr);
  Partial& a = t.open(1, 10);
  Partial& b = t.open(1, 11);
  Partial& c = t.open(2, 10);
  EXPECT_EQ(t.find(1, 10), &a);
  EXPECT_EQ(t.find(1, 11), &b);
  EXPECT_EQ(t.find(2, 10), &c) << "origins have their own sequence spaces";
  EXPECT_EQ(t.size(), 3u);
  t.close(b);
  EXPECT_EQ(t.find(1, 11), nullptr);
  EXPECT_EQ(t.size(), 2u);
  t.close(b);  // twice is harmless
  EXPECT_EQ(t.size(), 2u);
}

TEST(Partials, BoundedAndTheLeastRecentlyUsedIsTheOneToGiveUp) {
  PartialTable t;
  for (uint64_t s = 0; s < PartialTable::kCapacity; ++s) t.open(7, s);
  EXPECT_TRUE(t.full());
  t.find(7, 0);  // message 0 had a chunk just now: message 1 is the oldest
  EXPECT_EQ(t.oldest().seq, 1u);
  t.close(t.oldest());
  EXPECT_FALSE(t.full());
  EXPECT_EQ(t.open(7, 1000).seq, 1000u);
  // One that holds nothing (being discarded) goes before any least recently used one.
  Partial* discarding = t.find(7, 50);
  ASSERT_NE(discarding, nullptr);
  discarding->mode = Partial::Mode::kDiscard;
  EXPECT_EQ(t.oldest().seq, 50u);
}

TEST(Partials, HeldChunksStayInOrderAndAreHandedOverOnce) {
  std::vector<transport::Slot> slots(3);
  HeldSlots notes("n");  // slots of no link: the node's own frames' notes, by index
  Partial p;
  for (uint32_t i = 0; i < 3; ++i) {
    slots[i].index = i;
    slots[i].length = 100 + i;
    p.hold(slots[i], notes);
  }
  EXPECT_EQ(p.held, 3u);
  EXPECT_EQ(p.bytes, 303u);
  transport::Slot* list = p.take();
  EXPECT_EQ(p.held, 0u);
  EXPECT_EQ(p.first, nullptr);
  uint32_t n = 0;
  for (transport::Slot* s = list; s; s = notes.next(*s)) EXPECT_EQ(s, &slots[n++]);
  EXPECT_EQ(n, 3u);
}

TEST(RingQueue, AnItemCanOvertakeTheOnesBeforeIt) {
  RingQueue<int> q(4);
  for (int i = 0; i < 6; ++i) q.push_back(i);  // grown, and wrapped once popped
  q.pop_front();
  q.push_back(6);
  q.move_to_front(3);  // 4 overtakes 1, 2, 3
  std::vector<int> order;
  while (!q.empty()) {
    order.push_back(q.front());
    q.pop_front();
  }
  EXPECT_EQ(order, (std::vector<int>{4, 1, 2, 3, 5, 6}));
}

}  // namespace
}  // namespace hoprelay::daemon
