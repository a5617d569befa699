// The C++ wrapper's Producer destroyed without close() (libhoprelay 1.8): it waits up to
// flush_on_destroy() for what was sent to be acknowledged, so a producer that goes out of scope
// early loses nothing on a healthy pipeline (it lost 8 of 1,000 before), and sends no
// end-of-stream mark (the stream did not end by close). When the wait runs out, what is given
// up is said through the log callback. The topology's node is a head and a leaf at once: the
// producer (on a thread of its own) sends into the consumer of this process.
//
//   raii_flush     (exit 0 and "raii_flush: ok" on success)
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <hoprelay/client.hpp>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "raii_flush: %s\n", what.c_str());
  std::exit(1);
}

const std::string kTopology =
    "[pipeline]\nname = \"raii\"\ntransport = \"tcp\"\n\n[nodes.solo]\nlisten = "
    "\"127.0.0.1:17938\"\n";
constexpr uint64_t kMessages = 1000;

std::mutex said_mutex;
std::string said;  // the producer's warnings
void keep_warnings(void*, int level, const char* line) {
  if (level < HOPRELAY_CLIENT_LOG_WARN) return;
  std::lock_guard<std::mutex> lock(said_mutex);
  said += std::string(line) + "\n";
}

hoprelay_producer_options options() {
  hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.log = keep_warnings;
  return po;
}

void send_all(hoprelay::Producer& p, uint64_t count) {
  char payload[64];
  for (uint64_t i = 0; i < count; ++i) {
    int n = std::snprintf(payload, sizeof payload, "message %llu", (unsigned long long)i);
    if (int rc = p.send(std::as_bytes(std::span(payload, size_t(n))))) {
      fail(std::string("send: ") + hoprelay_strerror(rc) + ": " + hoprelay_last_error());
    }
  }
}

}  // namespace

int main() {
  hoprelay::Consumer c(kTopology, "solo");

  // 1. Out of scope after its last send, the default wait: every message arrives, no end mark.
  std::atomic<bool> gone{false};
  std::thread producer([&gone] {
    {
      const hoprelay_producer_options po = options();
      hoprelay::Producer p(kTopology, "solo", &po);
      send_all(p, kMessages);
    }  // ~Producer waits for the acknowledgements: the consumer below releases each message
    gone = true;
  });
  uint64_t received = 0;
  while (received < kMessages) {
    hoprelay::Message m = c.recv(10000);
    if (!m) fail("recv after " + std::to_string(received) + ": " + hoprelay_last_error());
    if (m.end()) fail("an end mark after " + std::to_string(received) + " messages");
    ++received;
  }
  // The consumer's node moves (the last credits go out) only inside its calls, so it is
  // called until the producer is gone; nothing more may come.
  while (!gone) {
    if (hoprelay::Message m = c.recv(50); m) {
      fail(m.end() ? "an end mark from a producer that was not closed" : "a message too many");
    }
  }
  producer.join();
  if (!said.empty()) fail("warned with nothing to give up: " + said);

  // 2. The wait runs out (the consumer holds the messages): what is given up is said.
  std::vector<hoprelay::Message> held;
  std::thread impatient([] {
    const hoprelay_producer_options po = options();
    hoprelay::Producer p(kTopology, "solo", &po);
    p.flush_on_destroy(300);
    send_all(p, 5);
  });
  while (held.size() < 5) {
    hoprelay::Message m = c.recv(10000);
    if (!m) fail(std::string("recv of the held messages: ") + hoprelay_last_error());
    held.push_back(std::move(m));
  }
  impatient.join();
  const std::string want =
      "destroyed with 5 messages not yet acknowledged by solo: given up, and no end-of-stream "
      "mark";
  if (said.find(want) == std::string::npos) fail("warned \"" + said + "\", not \"" + want + "\"");
  held.clear();  // released now: acknowledged to nobody, the producer is gone
  std::printf("raii_flush: ok (%llu messages after an unclosed producer, none lost)\n",
              (unsigned long long)received);
  return 0;
}
