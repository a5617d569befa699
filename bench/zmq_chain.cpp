// ZeroMQ reference for bench/run.sh: a chain of the same shape as hoprelay's A -> B -> C,
//   PUSH (producer) -> proxy -> proxy -> PULL (sink), every hop on tcp://127.0.0.1,
// each stage a thread with its own zmq context (its own I/O thread), as separate processes
// would have. Sends COUNT messages of SIZE bytes and prints
//   zmq_chain SIZE COUNT SECONDS MAXRSS_KIB
// where SECONDS runs from the first send to the last message received by the sink, and
// MAXRSS_KIB is the peak RSS of the whole process (all four stages).
// No acknowledgements: ZeroMQ's PUSH/PULL is fire-and-forget with high-water-mark backpressure,
// while hoprelay send returns only when every message is acknowledged end to end.
//
//   zmq_chain SIZE COUNT --rate R --latency FILE
// paces the producer at R messages/s and stamps each message with its send time (as
// `hoprelay send --stamp` does); the sink records each message's latency in the histogram
// that bench/latency_stage.c uses and writes it to FILE (bench/latency_hist.h).
//
// High-water marks: ZeroMQ's default of 1000 messages per queue, lowered for large messages
// to what fits in 64 MiB (at least 4), the same budget bench/run.sh gives hoprelay's slots;
// otherwise 16 MiB messages would queue gigabytes.
#include <sys/resource.h>
#include <zmq.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "latency_hist.h"

namespace {

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "zmq_chain: %s: %s\n", what, zmq_strerror(zmq_errno()));
    std::exit(1);
  }
}

// Binds a socket of TYPE on an ephemeral loopback port and returns the endpoint it got.
std::string bind_any(void* sock) {
  check(zmq_bind(sock, "tcp://127.0.0.1:*") == 0, "bind");
  char endpoint[256];
  size_t len = sizeof endpoint;
  check(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, endpoint, &len) == 0, "getsockopt");
  return endpoint;
}

void set_int(void* sock, int opt, int value) {
  check(zmq_setsockopt(sock, opt, &value, sizeof value) == 0, "setsockopt");
}

// Receives COUNT messages on IN and sends each on OUT, like zmq_proxy but with an end.
void forward(void* in, void* out, unsigned long count) {
  zmq_msg_t msg;
  for (unsigned long i = 0; i < count; ++i) {
    check(zmq_msg_init(&msg) == 0, "msg_init");
    check(zmq_msg_recv(&msg, in, 0) >= 0, "proxy recv");
    check(zmq_msg_send(&msg, out, 0) >= 0, "proxy send");
  }
}

}  // namespace

int main(int argc, char** argv) {
  double rate = 0;
  const char* latency_file = nullptr;
  if (argc == 7 && std::strcmp(argv[3], "--rate") == 0 && std::strcmp(argv[5], "--latency") == 0) {
    rate = std::strtod(argv[4], nullptr);
    latency_file = argv[6];
  } else if (argc != 3) {
    std::fprintf(stderr, "usage: zmq_chain SIZE COUNT [--rate R --latency FILE]\n");
    return 2;
  }
  const size_t size = std::strtoul(argv[1], nullptr, 10);
  const unsigned long count = std::strtoul(argv[2], nullptr, 10);
  if (size == 0 || count == 0 || (latency_file && (rate <= 0 || size < sizeof(uint64_t)))) {
    std::fprintf(stderr, "zmq_chain: SIZE, COUNT and R must be positive, SIZE >= 8 with R\n");
    return 2;
  }
  const int hwm = static_cast<int>(std::clamp<size_t>((size_t{64} << 20) / size, 4, 1000));

  // Contexts: producer, proxy 1, proxy 2, sink.
  void* ctx[4];
  for (auto& c : ctx) check((c = zmq_ctx_new()) != nullptr, "ctx_new");

  void* sink = zmq_socket(ctx[3], ZMQ_PULL);
  void* p2_in = zmq_socket(ctx[2], ZMQ_PULL);
  void* p2_out = zmq_socket(ctx[2], ZMQ_PUSH);
  void* p1_in = zmq_socket(ctx[1], ZMQ_PULL);
  void* p1_out = zmq_socket(ctx[1], ZMQ_PUSH);
  void* prod = zmq_socket(ctx[0], ZMQ_PUSH);
  for (void* s : {sink, p2_in, p2_out, p1_in, p1_out, prod}) {
    check(s != nullptr, "socket");
    set_int(s, ZMQ_LINGER, 5000);
    set_int(s, ZMQ_SNDHWM, hwm);
    set_int(s, ZMQ_RCVHWM, hwm);
  }
  const std::string sink_ep = bind_any(sink);
  const std::string p2_ep = bind_any(p2_in);
  const std::string p1_ep = bind_any(p1_in);
  check(zmq_connect(p2_out, sink_ep.c_str()) == 0, "connect");
  check(zmq_connect(p1_out, p2_ep.c_str()) == 0, "connect");
  check(zmq_connect(prod, p1_ep.c_str()) == 0, "connect");

  std::thread proxy2([&] { forward(p2_in, p2_out, count); });
  std::thread proxy1([&] { forward(p1_in, p1_out, count); });

  using clock = std::chrono::steady_clock;
  clock::time_point start;
  std::thread producer([&] {
    std::vector<char> payload(size, 'x');
    // Let the three connections come up first, so the first message does not wait for them
    // (hoprelay's producer too starts on a connected head, its relays long connected).
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    start = clock::now();
    for (unsigned long i = 0; i < count; ++i) {
      if (latency_file) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<clock::duration>(
                                                  std::chrono::duration<double>(i / rate)));
        lat_stamp(payload.data());
      } else {
        std::memcpy(payload.data(), &i, size < sizeof i ? size : sizeof i);
      }
      check(zmq_send(prod, payload.data(), size, 0) == static_cast<int>(size), "send");
    }
  });

  zmq_msg_t msg;
  unsigned long bytes = 0;
  auto hist = std::make_unique<lat_hist>();
  for (unsigned long i = 0; i < count; ++i) {
    check(zmq_msg_init(&msg) == 0, "msg_init");
    const int n = zmq_msg_recv(&msg, sink, 0);
    check(n >= 0, "sink recv");
    if (latency_file) lat_record(hist.get(), zmq_msg_data(&msg), lat_now_ns());
    bytes += static_cast<unsigned long>(n);
    zmq_msg_close(&msg);
  }
  const double seconds = std::chrono::duration<double>(clock::now() - start).count();
  producer.join();
  proxy1.join();
  proxy2.join();
  if (bytes != size * count) {
    std::fprintf(stderr, "zmq_chain: received %lu bytes, expected %lu\n", bytes, size * count);
    return 1;
  }
  for (void* s : {sink, p2_in, p2_out, p1_in, p1_out, prod}) zmq_close(s);
  for (auto& c : ctx) zmq_ctx_term(c);
  if (latency_file && lat_write(hist.get(), latency_file) != 0) {
    std::perror(latency_file);
    return 1;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("zmq_chain %zu %lu %.6f %ld\n", size, count, seconds, ru.ru_maxrss);
  return 0;
}
