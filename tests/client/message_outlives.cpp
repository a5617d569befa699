// The C++ wrapper (hoprelay/client.hpp): a Message declared before its Consumer outlives it.
// Its destructor and release_at() must not call into the closed handle (it did: a
// use-after-free that ASan reports); the consumer's handle is shared with its messages, so they
// find it closed and release nothing. The topology's node is a head and a leaf at once: the
// producer (on a thread of its own) sends into the consumer of this process. Also: a recv that
// times out while the application holds messages says so. And abandoning (1.3): a message of a
// consumer with a state_dir whose scope an exception unwinds is abandoned, not released (not
// recorded as taken: it comes again to the next consumer); recv then refuses, naming it, and
// an abandoned message cannot be released or abandoned again. Since 1.8 also one that leaves
// its scope unreleased without an exception (nothing of a durable consumer is released
// implicitly).
//
//   message_outlives TOPOLOGY NODE     (exit 0 and "message_outlives: ok" on success)
#include <unistd.h>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <hoprelay/client.hpp>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

[[noreturn]] void fail(const std::string& what) {
  std::fprintf(stderr, "message_outlives: %s\n", what.c_str());
  std::exit(1);
}

const char kFirst[] = "released by its destructor after the consumer closed";
const char kSecond[] = "released by release_at after the consumer closed";

void expect_said(const std::string& what, const std::string& text) {
  const std::string said = hoprelay_last_error();
  if (said.find(text) == std::string::npos) fail(what + " says \"" + said + "\", not " + text);
}

void abandoned(const std::string& topology, const std::string& node) {
  char dir[] = "/tmp/outlives.XXXXXX";
  if (!mkdtemp(dir)) fail("mkdtemp");
  const std::string state = std::string(dir) + "/state";
  hoprelay_consumer_options co;
  hoprelay_consumer_options_init(&co);
  co.state_dir = state.c_str();
  std::atomic<int> done{0};
  std::thread producer([&] {
    hoprelay_producer_options po;
    hoprelay_producer_options_init(&po);
    po.origin = 77;
    hoprelay::Producer p(topology, node, &po);
    p.flush_on_destroy(0);  // its message was never taken: nothing to wait for
    if (int rc = p.send(std::as_bytes(std::span(kFirst, std::strlen(kFirst))))) {
      fail(std::string("send: ") + hoprelay_strerror(rc));
    }
    // Alive (and replaying what was not acknowledged) until the second consumer has it.
    while (done.load() == 0) hoprelay_producer_process(p.get()), usleep(1000);
  });
  {
    hoprelay::Consumer c(topology, node, &co);
    try {
      hoprelay::Message m = c.recv(10000);
      if (!m) fail("the durable consumer received nothing within 10 s");
      throw std::runtime_error("the application's write failed");
    } catch (const std::runtime_error&) {
    }
    int status = 0;
    if (c.recv(100, &status) || status != HOPRELAY_ESTATE) {
      fail(std::string("recv after a message was abandoned: ") + hoprelay_strerror(status) +
           ", not ESTATE");
    }
    expect_said("recv after the abandon", "recv: message 0 of origin 77 was abandoned");
  }
  {
    hoprelay::Consumer c(topology, node, &co);
    if (c.resume_seq(77) != 0) fail("the abandoned message was recorded as taken");
    hoprelay_message m{}, copy{};
    if (int rc = hoprelay_consumer_recv(c.get(), &m, 10000)) {
      fail(std::string("the abandoned message did not come again: ") + hoprelay_strerror(rc));
    }
    if (m.origin != 77 || m.seq != 0) fail("another message came first");
    copy = m;
    if (hoprelay_consumer_abandon(c.get(), &m) != HOPRELAY_OK) fail("abandon refused");
    if (hoprelay_consumer_release(c.get(), &copy) != HOPRELAY_ESTATE) {
      fail("an abandoned message was released");
    }
    expect_said("release of an abandoned message", "released (or abandoned) already");
    if (hoprelay_consumer_abandon(c.get(), &copy) != HOPRELAY_ESTATE) {
      fail("a message was abandoned twice");
    }
  }
  {
    // Since 1.8 no message of a durable consumer is released implicitly: one that leaves its
    // scope unreleased, with no exception, is abandoned too (released, it would be recorded
    // as taken whether or not the application had made it durable).
    hoprelay::Consumer c(topology, node, &co);
    {
      hoprelay::Message m = c.recv(10000);
      if (!m || m.seq() != 0) fail("the abandoned message did not come again to a third consumer");
    }
    int status = 0;
    if (c.recv(100, &status) || status != HOPRELAY_ESTATE) {
      fail(std::string("recv after a durable message left its scope unreleased: ") +
           hoprelay_strerror(status) + ", not ESTATE");
    }
    expect_said("recv after the implicit abandon", "recv: message 0 of origin 77 was abandoned");
    expect_said("recv after the implicit abandon", "release each with release_at()");
    if (c.resume_seq(77) != 0) fail("a message left unreleased was recorded as taken");
  }
  done.store(1);
  producer.join();
  std::string rm = std::string("rm -rf ") + dir;
  if (std::system(rm.c_str()) != 0) fail("rm");
}

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
      p.flush_on_destroy(0);                 // acknowledged only once the main thread releases them
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
  abandoned(topology, node);
  std::printf("message_outlives: ok\n");
  return 0;  // `first` is released by its destructor here: nothing to call into
}
