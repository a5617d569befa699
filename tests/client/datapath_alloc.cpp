// libhoprelay's datapath through its public calls, allocation-free once warm: a producer and a
// consumer in this process, driven from one thread with timeout 0 (as tests/client/
// nonblocking.c), messages sent by copy and by reserve/commit, whole and larger than a slot
// (chunks, reassembled for the consumer), each received, checked and released. The process's
// operator new and pthread_mutex_lock calls are counted (tests/unit/alloc_count.cpp and
// lock_count.cpp define them in the executable; the library's calls resolve to them as well)
// over the second run of messages:
//  - through a node: the consumer runs the node the producer sends to over TCP on loopback;
//  - run_head: the producer runs the head itself, which forwards over TCP to the consumer's leaf.
//
//   datapath_alloc      (exit 0 and "datapath_alloc: ok ..." on success)
#include <hoprelay/client.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "../unit/alloc_count.h"
#include "../unit/lock_count.h"

namespace {

[[noreturn]] void die(const char* what, int rc) {
  std::fprintf(stderr, "datapath_alloc: %s: %s: %s\n", what, hoprelay_strerror(rc),
               hoprelay_last_error());
  std::exit(1);
}

// Message `seq`'s size: a quarter slot, a slot, or 2.5 slots (chunks).
size_t size_of(uint64_t seq, size_t slot) {
  switch (seq % 3) {
    case 0:
      return slot / 4;
    case 1:
      return slot;
    default:
      return slot * 5 / 2;
  }
}

// Its first 8 bytes are its sequence number, the rest a byte of it.
void fill(unsigned char* p, size_t n, uint64_t seq) {
  std::memset(p, static_cast<int>(seq * 7 + 1), n);
  std::memcpy(p, &seq, sizeof seq);
}

class Run {
 public:
  Run(hoprelay_producer* p, hoprelay_consumer* c) : p_(p), c_(c) {
    slot_ = hoprelay_producer_max_reserve(p);
    copy_.resize(slot_ * 3);
    expect_.resize(slot_ * 3);
  }
  // Sends and takes messages until `until` have been received.
  void to(uint64_t until) {
    while (received_ < until) {
      while (sent_ < until) {
        const size_t n = size_of(sent_, slot_);
        int rc;
        if (sent_ % 2 == 1) {  // zero copy, larger than a slot too (chunks, since 1.5)
          void* buf = nullptr;
          rc = hoprelay_producer_reserve(p_, n, &buf, 0);
          if (rc == HOPRELAY_OK) {
            fill(static_cast<unsigned char*>(buf), n, sent_);
            rc = hoprelay_producer_commit(p_, n, 0, nullptr);
          }
        } else {
          fill(copy_.data(), n, sent_);
          rc = hoprelay_producer_send(p_, copy_.data(), n, 0, nullptr, 0);
        }
        if (rc == HOPRELAY_EAGAIN) break;
        if (rc) die("send", rc);
        ++sent_;
      }
      hoprelay_message m;
      int rc;
      while ((rc = hoprelay_consumer_recv(c_, &m, 0)) == HOPRELAY_OK) {
        const size_t n = size_of(received_, slot_);
        fill(expect_.data(), n, received_);
        if (m.seq != received_ || m.length != n || std::memcmp(m.data, expect_.data(), n) != 0) {
          std::fprintf(stderr, "datapath_alloc: seq %llu (%zu bytes), expected %llu (%zu)\n",
                       static_cast<unsigned long long>(m.seq), m.length,
                       static_cast<unsigned long long>(received_), n);
          std::exit(1);
        }
        ++received_;
        if ((rc = hoprelay_consumer_release(c_, &m)) != HOPRELAY_OK) die("release", rc);
      }
      if (rc != HOPRELAY_EAGAIN) die("recv", rc);
      if ((rc = hoprelay_producer_process(p_)) != HOPRELAY_OK) die("producer_process", rc);
      if ((rc = hoprelay_consumer_process(c_)) != HOPRELAY_OK) die("consumer_process", rc);
    }
  }

 private:
  hoprelay_producer* p_;
  hoprelay_consumer* c_;
  size_t slot_ = 0;
  std::vector<unsigned char> copy_, expect_;
  uint64_t sent_ = 0, received_ = 0;
};

struct Counts {
  uint64_t allocations = 0;
  uint64_t locks = 0;  // pthread_mutex_lock calls: std::mutex, and a log line's sink
};

// Opens the consumer on `leaf` and a producer to `head` (run_head: running it), warms the
// path with 2,000 messages and counts the allocations and locks of the next 6,000.
Counts count(const char* topology, const char* head, const char* leaf, int run_head) {
  hoprelay_consumer* c = nullptr;
  if (int rc = hoprelay_consumer_open(topology, leaf, nullptr, &c)) die("consumer_open", rc);
  hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.connect_timeout_ms = 0;
  po.run_head = run_head;
  po.origin = 9;
  hoprelay_producer* p = nullptr;
  if (int rc = hoprelay_producer_open(topology, head, &po, &p)) die("producer_open", rc);
  for (int tries = 0;; ++tries) {
    int rc = hoprelay_producer_wait_connected(p, 0);
    if (rc == HOPRELAY_OK) break;
    if (rc != HOPRELAY_EAGAIN || tries > 100000) die("wait_connected", rc);
    hoprelay_consumer_process(c);
  }
  Run run(p, c);
  run.to(2000);
  // HOPRELAY_TEST_ALLOC_TRACE=1: the stack of each allocation counted, on stderr.
  hoprelay::test::trace_allocations(std::getenv("HOPRELAY_TEST_ALLOC_TRACE") != nullptr);
  const uint64_t before = hoprelay::test::allocations();
  const uint64_t locks_before = hoprelay::test::mutex_locks();
  run.to(8000);
  const Counts made{hoprelay::test::allocations() - before,
                    hoprelay::test::mutex_locks() - locks_before};
  hoprelay::test::trace_allocations(false);
  hoprelay_producer_destroy(p);  // every message was received and released: nothing to wait for
  hoprelay_consumer_destroy(c);
  return made;
}

}  // namespace

int main() {
  // Topologies as text, on ports of their own. 4 KiB slots; 2.5-slot messages are chunks.
  const char* one =
      "[pipeline]\nname = \"alloc1\"\ntransport = \"tcp\"\nslot_size = \"4KiB\"\nslots = 16\n\n"
      "[nodes.solo]\nlisten = \"127.0.0.1:17940\"\n";
  const char* two =
      "[pipeline]\nname = \"alloc2\"\ntransport = \"tcp\"\nslot_size = \"4KiB\"\nslots = 16\n\n"
      "[nodes.h]\nlisten = \"127.0.0.1:17941\"\ndownstream = [\"l\"]\n\n"
      "[nodes.l]\nlisten = \"127.0.0.1:17942\"\n";
  const uint64_t locks_at_start = hoprelay::test::mutex_locks();
  const Counts node = count(one, "solo", "solo", 0);
  // Opening logs (spdlog's sink locks): the counter sees inside the library.
  if (hoprelay::test::mutex_locks() == locks_at_start) {
    std::fprintf(stderr, "datapath_alloc: no lock counted while opening: is the counter in?\n");
    return 1;
  }
  const Counts head = count(two, "h", "l", 1);
  std::printf(
      "datapath_alloc: 6000 messages: %llu allocations and %llu locks through a node, %llu and "
      "%llu running the head\n",
      static_cast<unsigned long long>(node.allocations),
      static_cast<unsigned long long>(node.locks),
      static_cast<unsigned long long>(head.allocations),
      static_cast<unsigned long long>(head.locks));
  if (node.allocations || node.locks || head.allocations || head.locks) return 1;
  std::printf("datapath_alloc: ok\n");
  return 0;
}
