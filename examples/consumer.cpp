// A consumer in C++: runs leaf node NODE of TOPOLOGY, checks every payload that producer.c
// sends (byte i of message seq is (seq + i) % 251) and stops when the stream ends.
//
//   c++ -std=c++20 consumer.cpp $(pkg-config --cflags --libs hoprelay) -o consumer
//   ./consumer TOPOLOGY NODE
#include <cstdio>
#include <hoprelay/client.hpp>

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s TOPOLOGY NODE\n", argv[0]);
    return 2;
  }
  try {
    hoprelay::Consumer consumer(argv[1], argv[2]);
    std::printf("consumer: running node %s\n", argv[2]);
    std::fflush(stdout);
    unsigned long messages = 0, corrupt = 0, out_of_order = 0;
    unsigned long long bytes = 0, expected = 0;
    for (;;) {
      int status = 0;
      hoprelay::Message m = consumer.recv(60000, &status);
      if (!m) {
        std::fprintf(stderr, "recv: %s: %s\n", hoprelay_strerror(status), hoprelay_last_error());
        return 1;
      }
      if (m.end()) break;
      if (m.seq() != expected) ++out_of_order;
      expected = m.seq() + 1;
      auto data = m.data();  // the slot's memory: valid until m is released
      for (size_t i = 0; i < data.size(); ++i) {
        if (static_cast<unsigned char>(data[i]) != (m.seq() + i) % 251) {
          ++corrupt;
          break;
        }
      }
      ++messages;
      bytes += data.size();
    }  // each Message is released when it goes out of scope: acknowledged upstream
    std::printf("consumer: %lu messages, %llu bytes, %lu corrupt, %lu out of order\n", messages,
                bytes, corrupt, out_of_order);
    return corrupt || out_of_order ? 1 : 0;
  } catch (const hoprelay::Error& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}
