// libhoprelay from several threads at once, as client.h allows ("different handles may be used
// from different threads at once"): two pipelines, each driven by two threads of its own, a
// producer's and a consumer's, all four opening, sending, receiving and closing at the same
// time, with their log callbacks on. Every message arrives once, in order, with its bytes. Its
// point is ThreadSanitizer (a build with -fsanitize=thread): what handles share behind the
// application's back (loggers, statics), and the worker threads a node's stage runs on
// (threads = 2) inside the application's process, at both ends:
//  - the first pipeline's producer runs its head (run_head), whose zstd stage compresses each
//    message (each chunk of a large one) in place in the producer's own buffers on 2 workers
//    while the producer's thread copies the next messages into other buffers of the same
//    region; the head sends to the consumer's leaf over TCP, which decompresses them;
//  - the second is one node, a head and a leaf, that the consumer runs with its stage on 2
//    workers, and the producer sends into it over TCP.
// Then what client.h does not allow, as an application makes the mistake: a second thread's
// call on a consumer in a call is refused (ESTATE, naming it); two threads sending on one
// producer, 20 runs of COUNT sends each: every call OK or ESTATE, the leaf has exactly the OK
// ones.
//
//   client_threads COUNT     (exit 0 and "client_threads: ok ..." on success)
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <hoprelay/client.h>

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "client_threads: %s\n", what.c_str());
  std::exit(1);
}

// 4 KiB slots: every seventh message is larger than a slot and goes as chunks.
size_t size_of(uint64_t seq) {
  return seq % 7 == 6 ? 9000 + seq % 100 : 1 + (seq * 7919) % 3000;
}

unsigned char byte_of(uint64_t seq, size_t i) {
  return static_cast<unsigned char>(seq * 31 + i);
}

// Lines are dropped; the callback is there so that every handle's log lines are routed.
std::atomic<uint64_t> log_lines{0};
void count_line(void*, int, const char*) {
  log_lines.fetch_add(1, std::memory_order_relaxed);
}

// Two nodes: `head`, which the producer runs, compressing on 2 workers, and the consumer's
// `leaf`. byte_of repeats every 256 bytes, so most messages and chunks travel compressed;
// shorter ones, with no byte twice, do not shrink and go as they are: the leaf sees both.
std::string run_head_topology(int head_port, int leaf_port) {
  return "[pipeline]\nname = \"threads" + std::to_string(head_port) +
         "\"\ntransport = \"tcp\"\nslot_size = \"4KiB\"\nslots = 16\n\n[nodes.head]\nlisten = "
         "\"127.0.0.1:" +
         std::to_string(head_port) +
         "\"\nthreads = 2\nstage = { plugin = \"zstd\", mode = \"compress\" }\ndownstream = "
         "[\"leaf\"]\n\n[nodes.leaf]\nlisten = \"127.0.0.1:" +
         std::to_string(leaf_port) + "\"\nstage = { plugin = \"zstd\", mode = \"decompress\" }\n";
}

std::string topology(int port, const std::string& node_extra) {
  return "[pipeline]\nname = \"threads" + std::to_string(port) +
         "\"\ntransport = \"tcp\"\nslot_size = \"4KiB\"\nslots = 16\n\n[nodes.solo]\nlisten = "
         "\"127.0.0.1:" +
         std::to_string(port) + "\"\n" + node_extra;
}

struct Pipeline {
  std::string topology;
  const char* head = "solo";  // the node the producer sends into, or runs (run_head)
  const char* leaf = "solo";  // the node the consumer runs
  bool run_head = false;
  std::atomic<bool> listening{false};
  uint64_t received = 0;
};

void consume(Pipeline& p, uint64_t count) {
  hoprelay_consumer_options co;
  hoprelay_consumer_options_init(&co);
  co.log = count_line;
  co.log_level = HOPRELAY_CLIENT_LOG_DEBUG;
  hoprelay_consumer* c = nullptr;
  if (int rc = hoprelay_consumer_open(p.topology.c_str(), p.leaf, &co, &c)) {
    fail(std::string("consumer_open: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
  }
  p.listening.store(true);
  for (;;) {
    hoprelay_message m;
    if (int rc = hoprelay_consumer_recv(c, &m, 30000)) {
      fail(std::string("recv: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
    }
    if (m.flags & HOPRELAY_MESSAGE_END) {
      hoprelay_consumer_release(c, &m);
      break;
    }
    if (m.seq != p.received) {
      fail("got seq " + std::to_string(m.seq) + ", expected " + std::to_string(p.received));
    }
    if (m.length != size_of(m.seq)) fail("seq " + std::to_string(m.seq) + ": wrong length");
    const auto* data = static_cast<const unsigned char*>(m.data);
    for (size_t i = 0; i < m.length; ++i) {
      if (data[i] != byte_of(m.seq, i)) fail("seq " + std::to_string(m.seq) + ": wrong bytes");
    }
    ++p.received;
    if (int rc = hoprelay_consumer_release(c, &m)) {
      fail(std::string("release: ") + hoprelay_strerror(rc));
    }
  }
  hoprelay_consumer_destroy(c);
  if (p.received != count) {
    fail(std::to_string(p.received) + " messages, expected " + std::to_string(count));
  }
}

void produce(Pipeline& p, uint64_t count) {
  while (!p.listening.load()) usleep(1000);
  hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.log = count_line;
  po.log_level = HOPRELAY_CLIENT_LOG_DEBUG;
  po.run_head = p.run_head ? 1 : 0;
  hoprelay_producer* h = nullptr;
  if (int rc = hoprelay_producer_open(p.topology.c_str(), p.head, &po, &h)) {
    fail(std::string("producer_open: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
  }
  std::vector<unsigned char> buf(10000);
  for (uint64_t seq = 0; seq < count; ++seq) {
    const size_t n = size_of(seq);
    for (size_t i = 0; i < n; ++i) buf[i] = byte_of(seq, i);
    if (int rc = hoprelay_producer_send(h, buf.data(), n, 0, nullptr, 30000)) {
      fail(std::string("send: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
    }
  }
  if (int rc = hoprelay_producer_close(h, 30000)) {
    fail(std::string("producer_close: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
  }
  hoprelay_producer_destroy(h);
}

// Since 1.8: a call on a handle while another thread's call on it is in progress is refused,
// naming that call, and changes nothing (the call in progress goes on). The waiting thread's
// recv takes 3 s with no producer; the main thread tries until it meets it.
void a_second_thread_is_refused() {
  const std::string t = topology(17937, "");
  hoprelay_consumer* c = nullptr;
  if (int rc = hoprelay_consumer_open(t.c_str(), "solo", nullptr, &c)) {
    fail(std::string("consumer_open: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
  }
  std::atomic<int> waited{HOPRELAY_OK};
  std::atomic<bool> done{false};
  std::thread waiter([&] {
    hoprelay_message m;
    int rc;
    do {
      rc = hoprelay_consumer_recv(c, &m, 3000);
    } while (rc == HOPRELAY_ESTATE);  // the main thread had it
    waited = rc;
    done = true;
  });
  bool refused = false;
  while (!refused && !done) {
    hoprelay_message m;
    int rc = hoprelay_consumer_recv(c, &m, 0);
    if (rc == HOPRELAY_ESTATE) {
      const std::string why = hoprelay_last_error();
      if (why.find("recv: called while recv runs on this consumer in another thread") ==
          std::string::npos) {
        fail("refused with \"" + why + "\"");
      }
      refused = true;
    } else if (rc != HOPRELAY_EAGAIN) {
      fail(std::string("recv beside another thread's: ") + hoprelay_strerror(rc));
    } else {
      usleep(10000);
    }
  }
  if (!refused) fail("the second thread's recv was never refused");
  hoprelay_consumer_close(c);  // refused too: freeing the node under the waiting recv would crash
  waiter.join();
  if (waited != HOPRELAY_ETIMEDOUT) {
    fail(std::string("the waiting recv returned ") + hoprelay_strerror(waited) +
         ", not ETIMEDOUT: the refused calls changed it");
  }
  hoprelay_consumer_destroy(c);
}

// Issue 43's second trap: two threads sending on one producer at once, `runs` times, `count`
// calls each. Every call returns OK or ESTATE (another thread's send in progress), and the
// leaf gets exactly the messages whose send returned OK, each once, with its bytes: a
// message's first bytes name its thread and call, so the leaf can tell. Before 1.8 the same
// lost a message or crashed.
uint64_t two_threads_on_one_producer(int runs, uint64_t count) {
  const std::string t = topology(17938, "");
  uint64_t refused_total = 0;
  for (int run = 0; run < runs; ++run) {
    std::vector<unsigned char> ok[2] = {std::vector<unsigned char>(count, 0),
                                        std::vector<unsigned char>(count, 0)};
    std::vector<unsigned char> got[2] = {std::vector<unsigned char>(count, 0),
                                         std::vector<unsigned char>(count, 0)};
    std::atomic<bool> listening{false};
    std::string wrong;  // the consumer's first finding
    std::thread consumer([&] {
      hoprelay_consumer* c = nullptr;
      if (int rc = hoprelay_consumer_open(t.c_str(), "solo", nullptr, &c)) {
        fail(std::string("consumer_open: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
      }
      listening = true;
      for (;;) {
        hoprelay_message m;
        if (int rc = hoprelay_consumer_recv(c, &m, 30000)) {
          fail(std::string("recv: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
        }
        if (m.flags & HOPRELAY_MESSAGE_END) {
          hoprelay_consumer_release(c, &m);
          break;
        }
        uint64_t call = 0;
        const auto* d = static_cast<const unsigned char*>(m.data);
        if (m.length == 64) std::memcpy(&call, d + 1, sizeof call);
        const bool bytes_ok =
            m.length == 64 && d[0] < 2 && call < count &&
            std::all_of(d + 9, d + 64, [&](unsigned char b) { return b == byte_of(call, d[0]); });
        if (!bytes_ok) {
          if (wrong.empty()) wrong = "a message of wrong bytes (seq " + std::to_string(m.seq) + ")";
        } else if (got[d[0]][call]++) {
          if (wrong.empty())
            wrong = "thread " + std::to_string(d[0]) + "'s call " + std::to_string(call) +
                    " arrived twice";
        }
        hoprelay_consumer_release(c, &m);
      }
      hoprelay_consumer_destroy(c);
    });
    while (!listening) usleep(1000);
    hoprelay_producer* h = nullptr;
    if (int rc = hoprelay_producer_open(t.c_str(), "solo", nullptr, &h)) {
      fail(std::string("producer_open: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
    }
    std::atomic<uint64_t> refused{0};
    auto sender = [&](unsigned char thread) {
      unsigned char buf[64];
      for (uint64_t call = 0; call < count; ++call) {
        buf[0] = thread;
        std::memcpy(buf + 1, &call, sizeof call);
        std::memset(buf + 9, byte_of(call, thread), sizeof buf - 9);
        const int rc = hoprelay_producer_send(h, buf, sizeof buf, 0, nullptr, 30000);
        if (rc == HOPRELAY_OK) {
          ok[thread][call] = 1;
        } else if (rc == HOPRELAY_ESTATE) {
          refused.fetch_add(1, std::memory_order_relaxed);
        } else {
          fail(std::string("send beside another thread's: ") + hoprelay_strerror(rc) + ": " +
               hoprelay_last_error());
        }
      }
    };
    std::thread first(sender, 0), second(sender, 1);
    first.join();
    second.join();
    if (int rc = hoprelay_producer_close(h, 30000)) {
      fail(std::string("producer_close: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
    }
    hoprelay_producer_destroy(h);
    consumer.join();
    if (!wrong.empty())
      fail("two threads on one producer, run " + std::to_string(run) + ": " + wrong);
    for (int i = 0; i < 2; ++i) {
      for (uint64_t call = 0; call < count; ++call) {
        if (ok[i][call] != got[i][call]) {
          fail("two threads on one producer, run " + std::to_string(run) + ": thread " +
               std::to_string(i) + "'s call " + std::to_string(call) + " returned " +
               (ok[i][call] ? "OK and did not arrive" : "ESTATE and arrived"));
        }
      }
    }
    refused_total += refused;
  }
  return refused_total;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) fail("usage: client_threads COUNT");
  const uint64_t count = std::strtoull(argv[1], nullptr, 10);
  Pipeline pipelines[2];
  pipelines[0].topology = run_head_topology(17936, 17934);
  pipelines[0].head = "head";
  pipelines[0].leaf = "leaf";
  pipelines[0].run_head = true;
  pipelines[1].topology = topology(17935, "threads = 2\nstage = { plugin = \"passthrough\" }\n");
  std::vector<std::thread> threads;
  for (Pipeline& p : pipelines) {
    threads.emplace_back(consume, std::ref(p), count);
    threads.emplace_back(produce, std::ref(p), count);
  }
  for (auto& t : threads) t.join();
  a_second_thread_is_refused();
  const int runs = 20;
  const uint64_t refused = two_threads_on_one_producer(runs, count);
  std::printf(
      "client_threads: ok (%llu messages through each of 2 pipelines, %llu log lines; "
      "%d runs of 2 threads x %llu sends on one producer: every call OK or ESTATE "
      "(%llu), the leaf got exactly the OK ones)\n",
      static_cast<unsigned long long>(count), static_cast<unsigned long long>(log_lines.load()),
      runs, static_cast<unsigned long long>(count), static_cast<unsigned long long>(refused));
  return 0;
}
