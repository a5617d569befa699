#include "hoprelay/common/generation_slab.h"

#include <gtest/gtest.h>

#include <vector>

namespace hoprelay {
namespace {

TEST(GenerationSlab, ReusesSlotsAndAnOldIdFindsNothing) {
  GenerationSlab<int> slab;
  int a = 1, b = 2, c = 3;
  const uint32_t ia = slab.add(&a);
  const uint32_t ib = slab.add(&b);
  EXPECT_EQ(slab.find(ia), &a);
  EXPECT_EQ(slab.find(ib), &b);
  EXPECT_TRUE(slab.remove(ia));
  EXPECT_FALSE(slab.remove(ia)) << "removed already";
  EXPECT_EQ(slab.find(ia), nullptr);
  const uint32_t ic = slab.add(&c);
  EXPECT_NE(ic, ia) << "the same slot under a new generation";
  EXPECT_EQ(ic & 0xffff, ia & 0xffff);
  EXPECT_EQ(slab.find(ia), nullptr) << "a late event for a's id never finds c";
  EXPECT_EQ(slab.find(ic), &c);
  EXPECT_EQ(slab.find(12345), nullptr) << "an id never given";
  EXPECT_EQ(slab.slots(), 2u);
}

// LinkThreads used to keep one entry per connect() for as long as the node ran: a downstream
// that reconnects (a reload, a peer down and back) 100,000 times takes one slot here.
TEST(GenerationSlab, AddAndRemoveManyTimesKeepsOneSlot) {
  GenerationSlab<int> slab;
  int x = 0;
  std::vector<uint32_t> seen;
  for (int i = 0; i < 100'000; ++i) {
    const uint32_t id = slab.add(&x);
    if (i < 3) seen.push_back(id);
    ASSERT_TRUE(slab.remove(id));
  }
  EXPECT_EQ(slab.slots(), 1u);
  for (uint32_t id : seen) EXPECT_EQ(slab.find(id), nullptr);
}

}  // namespace
}  // namespace hoprelay
