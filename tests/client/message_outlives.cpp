// The C++ wrapper (hoprelay/client.hpp): a Message declared before its Consumer outlives it.
// Its destructor and release_at() must not call into the closed handle (it did: a
// use-after-free that ASan reports); the consumer's handle is shared with its messages, so they
// find it closed and release nothing. The topology's node is a head and a leaf at once: the
// producer (on a thread of its own) sends into the consumer of this process. Also: a recv that
// times out while the application holds messages says so.
//
//   message_outlives TOPOLOGY NODE     (exit 0 and "message_outlives: ok" on success)
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <hoprelay/client.hpp>
#include <span>
#include <string>
#include <thread>

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "message_outlives: %s\n", what.c_str());
  std::exit(1);
}

const char kFirst[] = "released by its destructor after the consumer closed";
const char kSecond[] = "released by release_at after the consumer closed";

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) fail("usage: message_outlives TOPOLOGY NODE");
  const std::string topology = argv[1], node = argv[2];
  hoprelay::Message first, second;  // declared before the consumer: they outlive it
  {
    hoprelay::Consumer c(topology, node);
    std::atomic<bool> received{false};
    std::thread producer([&] {
      hoprelay::Producer p(topology, node);  // welcomed while the consumer's recv runs below
      for (const char* text : {kFirst, kSecond}) {
        if (int rc = p.send(std::as_bytes(std::span(text, std::strlen(text))))) {
          fail(std::string("send: ") + hoprelay_strerror(rc));
        }
      }
      while (!received.load()) std::this_thread::yield();
    });
    first = c.recv(10000);
    second = c.recv(10000);
    received.store(true);
    producer.join();
    if (!first || !second) fail("two messages not received within 10 s");
    auto same = [](const hoprelay::Message& m, const char* text) {
      return m.data().size() == std::strlen(text) &&
             std::memcmp(m.data().data(), text, m.data().size()) == 0;
    };
    if (!same(first, kFirst) || !same(second, kSecond)) fail("payloads differ");
    // Holding them, a recv that times out says so (not only that nothing came).
    int status = 0;
    if (c.recv(100, &status) || status != HOPRELAY_ETIMEDOUT) fail("a third message?");
    const std::string said = hoprelay_last_error();
    if (said.find("(the application holds 2 messages it has not released, of the 64 slots of "
                  "each link into node solo") == std::string::npos) {
      fail("the timeout says \"" + said + "\", not that the application holds 2 messages");
    }
  }  // the consumer closes: its messages were not released
  if (first || second) fail("a message whose consumer closed says it is still open");
  if (int rc = second.release_at(7); rc != HOPRELAY_ESTATE) {
    fail(std::string("release_at after the consumer closed: ") + hoprelay_strerror(rc) +
         ", not ESTATE");
  }
  std::printf("message_outlives: ok\n");
  return 0;  // `first` is released by its destructor here: nothing to call into
}
