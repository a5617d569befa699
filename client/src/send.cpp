#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "hoprelay/client.hpp"
#include "hoprelay/stages/pattern.h"
#include "send_summary.h"
#include "spdlog/spdlog.h"
#include "stop_signals.h"
#include "streams.h"

namespace hoprelay::client {
namespace {

using Clock = std::chrono::steady_clock;

// Thrown out of the sending loops once a stop signal came (stop_signals.h).
struct Interrupted {};

void stop_if_signalled() {
  if (stop_signal()) throw Interrupted{};
}

// A send that waits with nothing acknowledged for this long says so, once per stall: blocked in
// silence (a downstream peer down, held for with on_peer_down = "block"), it looks hung.
constexpr auto kStallNotice = std::chrono::seconds(10);

class StallNotice {
 public:
  StallNotice(Producer& p, const std::string& topology) : p_(p), topology_(topology) {}
  // A call that waited returned: after a notice, whether acknowledgements came back (nothing
  // to do otherwise: no clock read per message).
  void done() {
    if (said_) waiting();
  }
  // Called while a call waits (between its steps).
  void waiting() {
    const auto now = Clock::now();
    const uint64_t acked = p_.stats().acknowledged;
    if (acked != acked_) {
      if (said_) {
        std::fprintf(stderr, "hoprelay send: acknowledgements again after %lld s\n",
                     static_cast<long long>(
                         std::chrono::duration_cast<std::chrono::seconds>(now - since_).count()));
      }
      said_ = false;
      acked_ = acked;
      since_ = now;
      return;
    }
    if (said_ || now - since_ < kStallNotice) return;
    said_ = true;
    const uint64_t waiting = p_.stats().sent - acked;
    std::fprintf(stderr,
                 "hoprelay send: nothing acknowledged for %lld s, %llu message%s waiting: a node "
                 "or consumer downstream is down, stalled or holding messages (a relay keeps "
                 "what is routed to a peer that is down until it is back, with on_peer_down = "
                 "\"block\", the default). `hoprelay status --topology %s` shows where; the send "
                 "goes on by itself once it is back\n",
                 static_cast<long long>(
                     std::chrono::duration_cast<std::chrono::seconds>(now - since_).count()),
                 static_cast<unsigned long long>(waiting), waiting == 1 ? "" : "s",
                 topology_.c_str());
  }

 private:
  Producer& p_;
  const std::string& topology_;
  uint64_t acked_ = 0;
  Clock::time_point since_ = Clock::now();
  bool said_ = false;
};

// Calls wait(kStopStepMs) (a library call that waits up to its argument) until it returns
// anything but ETIMEDOUT: as long as it takes, unless a stop signal comes, also one that came
// during the step that succeeded (libhoprelay waits on through it). `notice`, if given, hears
// of each step that waited in vain.
template <class Wait>
int in_steps(Wait wait, StallNotice* notice = nullptr) {
  for (;;) {
    const int rc = wait(kStopStepMs);
    stop_if_signalled();
    if (rc != HOPRELAY_ETIMEDOUT) {
      if (notice) notice->done();
      return rc;
    }
    if (notice) notice->waiting();
  }
}

// Until fd is readable (or at its end): for standard input, which may wait for good. The
// producer's work (acknowledgements, a reconnection) is done meanwhile.
void wait_readable(int fd, Producer& producer) {
  for (;;) {
    pollfd p[2] = {{fd, POLLIN, 0}, {producer.fd(), POLLIN, 0}};
    const int ready = ::poll(p, 2, kStopStepMs);
    stop_if_signalled();
    if (ready > 0) {
      if (p[0].revents) return;
      producer.process();
    }
  }
}

// Reads exactly n bytes unless the input ends first; returns how many. With a producer, the
// input is standard input (a pipe or a terminal), polled in steps.
size_t read_full(int fd, std::byte* out, size_t n, Producer* waits) {
  size_t got = 0;
  while (got < n) {
    if (waits) wait_readable(fd, *waits);
    ssize_t r = ::read(fd, out + got, n - got);
    if (r < 0 && errno == EINTR) {
      stop_if_signalled();
      continue;
    }
    if (r < 0) throw std::runtime_error(std::string("read: ") + std::strerror(errno));
    if (r == 0) {
      // The end, unless a stop signal came: the process writing into the pipe dies of the
      // same Ctrl-C, and its end is not the input's (the stream would end cut short).
      stop_if_signalled();
      break;
    }
    got += size_t(r);
  }
  return got;
}

// Whether reading fd now would block (a pipe with nothing in it yet).
bool would_block(int fd) {
  pollfd p{fd, POLLIN, 0};
  return ::poll(&p, 1, 0) == 0;
}

// A buffered reader for the lines and length framings. With a producer (standard input), a
// read that would block (a stream with nothing more yet) first lets what was queued go out,
// then waits in steps, doing the producer's work.
class Input {
 public:
  Input(int fd, Producer* waits) : fd_(fd), buf_(1 << 20), waits_(waits) {}
  // The next line without its newline (a last line without one counts too); false at EOF.
  bool line(std::vector<std::byte>& out) {
    out.clear();
    for (;;) {
      if (pos_ == end_ && !fill()) return !out.empty();
      auto* nl = static_cast<std::byte*>(std::memchr(buf_.data() + pos_, '\n', end_ - pos_));
      size_t stop = nl ? size_t(nl - buf_.data()) : end_;
      out.insert(out.end(), buf_.begin() + long(pos_), buf_.begin() + long(stop));
      pos_ = stop;
      if (nl) {
        ++pos_;
        return true;
      }
    }
  }
  size_t read(std::byte* out, size_t n) {
    size_t got = 0;
    while (got < n) {
      if (pos_ == end_ && !fill()) break;
      size_t k = std::min(n - got, end_ - pos_);
      std::memcpy(out + got, buf_.data() + pos_, k);
      pos_ += k;
      got += k;
    }
    return got;
  }

 private:
  bool fill() {
    if (waits_ && would_block(fd_)) waits_->process();
    pos_ = 0;
    end_ = read_full_some();
    return end_ > 0;
  }
  size_t read_full_some() {
    for (;;) {
      if (waits_) wait_readable(fd_, *waits_);
      ssize_t r = ::read(fd_, buf_.data(), buf_.size());
      if (r < 0 && errno == EINTR) {
        stop_if_signalled();
        continue;
      }
      if (r < 0) throw std::runtime_error(std::string("read: ") + std::strerror(errno));
      if (r == 0) stop_if_signalled();  // as in read_full()
      return size_t(r);
    }
  }
  int fd_;
  std::vector<std::byte> buf_;
  Producer* waits_;
  size_t pos_ = 0, end_ = 0;
};

class Sender {
 public:
  Sender(Producer& p, const SendOptions& o, StallNotice& notice)
      : p_(p),
        o_(o),
        notice_(notice),
        t0_(Clock::now()),
        max_reserve_(o.copy ? 0 : p.max_message()),
        repeats_(p.resume_seq() > o.first_seq ? p.resume_seq() - o.first_seq : 0) {}

  // Paces to --rate: message n may leave at t0 + n / rate, not counting the first messages
  // the head has already (a resume), which are not sent.
  void pace(uint64_t n) {
    if (o_.rate <= 0 || n < repeats_) return;
    n -= repeats_;
    auto due = t0_ + std::chrono::duration_cast<Clock::duration>(
                         std::chrono::duration<double>(double(n) / o_.rate));
    for (auto now = Clock::now(); due > now; now = Clock::now()) {
      p_.process();  // what is queued leaves; acknowledgements come in
      pollfd pf{p_.fd(), POLLIN, 0};
      auto wait = std::chrono::ceil<std::chrono::milliseconds>(due - now).count();
      ::poll(&pf, 1, int(std::min<int64_t>(wait, kStopStepMs)));
      stop_if_signalled();
    }
  }
  void check(int rc) {
    if (rc != HOPRELAY_OK) throw_last(rc);
  }
  void send(std::span<const std::byte> m, bool more) {
    stop_if_signalled();
    check(
        in_steps([&](int step) { return p_.send(m, more ? HOPRELAY_SEND_MORE : 0, nullptr, step); },
                 &notice_));
    bytes_ += m.size();
  }
  // A buffer of n bytes for the next message: registered memory unless --copy was asked for
  // (larger than a slot too: the library sends it as chunks from where it lies).
  std::span<std::byte> begin(size_t n) {
    stop_if_signalled();
    if (n <= max_reserve_) {
      std::span<std::byte> b;
      check(in_steps(
          [&](int step) {
            int rc = 0;
            b = p_.reserve(n, step, &rc);
            return rc;
          },
          &notice_));
      return b;
    }
    big_.resize(n);
    return big_;
  }
  void end(std::span<std::byte> b, size_t n, bool more) {
    if (b.data() != big_.data()) {
      check(p_.commit(n, more ? HOPRELAY_SEND_MORE : 0));
      bytes_ += n;
    } else {
      send(b.first(n), more);
    }
  }
  uint64_t bytes() const { return bytes_; }

 private:
  Producer& p_;
  const SendOptions& o_;
  StallNotice& notice_;
  Clock::time_point t0_;
  size_t max_reserve_;  // the largest message the pipeline takes; 0 with --copy
  uint64_t repeats_;    // messages from the first that the head has already (not sent)
  std::vector<std::byte> big_;
  uint64_t bytes_ = 0;
};

void stamp(std::span<std::byte> b) {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  uint64_t ns = uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
  std::memcpy(b.data(), &ns, std::min(sizeof ns, b.size()));
}

uint64_t send_generated(Producer& p, Sender& s, const SendOptions& o) {
  for (uint64_t i = 0; i < o.count; ++i) {
    s.pace(i);
    const uint64_t seq = p.next_seq();
    auto b = s.begin(o.size);
    if (o.fill_header) {
      stages::fill_pattern_header(b.first(o.size), p.origin(), seq);
    } else {
      stages::fill_pattern(b.first(o.size), p.origin(), seq);
    }
    if (o.stamp) stamp(b);
    s.end(b, o.size, i + 1 < o.count && o.rate <= 0);
  }
  return o.count;
}

uint64_t send_stream(Producer& p, Sender& s, const SendOptions& o, int fd) {
  uint64_t n = 0;
  if (o.framing == Framing::kRaw) {
    for (;;) {
      s.pace(n);
      if (o.stdin_stream && would_block(fd)) p.process();  // the queued messages go now
      auto b = s.begin(o.size);
      size_t got = read_full(fd, b.data(), o.size, o.stdin_stream ? &p : nullptr);
      if (got == 0) break;  // the reserved buffer goes back at close, unsent
      s.end(b, got, true);
      ++n;
      if (got < o.size) break;
    }
    return n;
  }
  // The messages queued (HOPRELAY_SEND_MORE) go now: the last line of a burst must not wait
  // for the next one.
  Input in(fd, o.stdin_stream ? &p : nullptr);
  std::vector<std::byte> record;
  for (;;) {
    s.pace(n);
    if (o.framing == Framing::kLines) {
      if (!in.line(record)) break;
    } else {
      std::byte len[4];
      size_t got = in.read(len, 4);
      if (got == 0) break;
      if (got != 4) throw std::runtime_error("length framing: the input ends inside a length");
      uint32_t size = uint32_t(len[0]) << 24 | uint32_t(len[1]) << 16 | uint32_t(len[2]) << 8 |
                      uint32_t(len[3]);
      record.resize(size);
      if (in.read(record.data(), size) != size) {
        throw std::runtime_error("length framing: the input ends inside a record of " +
                                 std::to_string(size) + " bytes");
      }
    }
    s.send(record, true);  // an empty record is an empty message
    ++n;
  }
  return n;
}

// While the producer waits for the head to accept it (up to --connect-timeout), one line a
// second on a terminal, so that a head that is down is not 30 s of silence. Not when stderr
// is a file or a pipe: scripts and logs get the one error line at the end instead.
class WaitingNotice {
 public:
  WaitingNotice(const SendOptions& o) {
    if (!::isatty(STDERR_FILENO)) return;
    thread_ = std::thread([this, o] {
      std::unique_lock lock(mutex_);
      for (int s = 1; !cv_.wait_for(lock, std::chrono::seconds(1), [this] { return done_; }); ++s) {
        std::fprintf(stderr,
                     "hoprelay send: waiting for %s (node %s) to accept: is hoprelayd running "
                     "there? (%d s of %d)\n",
                     o.head_address.c_str(), o.head.c_str(), s, o.connect_timeout_ms / 1000);
      }
    });
  }
  // The wait is over (connected, refused or timed out).
  void stop() {
    if (!thread_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_one();
    thread_.join();
  }
  ~WaitingNotice() { stop(); }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

// close(), with its wait for the end mark's acknowledgement in steps, so that a stop signal
// ends it. Throws Error as close() does; a timeout's words give the whole timeout.
void close_in_steps(Producer& p, int timeout_ms) {
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    int step = kStopStepMs;
    if (timeout_ms >= 0) {
      auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()).count();
      step = int(std::clamp<int64_t>(left, 1, kStopStepMs));
    }
    const int rc = p.end(step);
    if (rc == HOPRELAY_OK) break;
    if (rc != HOPRELAY_ETIMEDOUT) throw_last(rc);
    stop_if_signalled();
    if (timeout_ms >= 0 && Clock::now() >= deadline) {
      const std::string why = hoprelay_last_error();
      const std::string down = " (the head is down)";
      throw Error(HOPRELAY_ETIMEDOUT, "end of stream: timed out after " +
                                          std::to_string(timeout_ms) + " ms" +
                                          (why.ends_with(down) ? down : ""));
    }
  }
  p.close(0);
}

// Says how far an interrupted send got and how to go on; returns 128 + the signal, as a shell
// reports a command a signal ended.
int report_interrupted(Producer& p, bool ending, bool run_head) {
  // The acknowledgements on their way, briefly: the counts then say what the head has.
  p.flush(2 * kStopStepMs);
  const auto stats = p.stats();
  const char* name = stop_signal_name();
  if (ending) {
    std::fprintf(stderr,
                 "hoprelay send: interrupted (%s) while waiting for the end-of-stream mark's "
                 "acknowledgement: all %llu messages were acknowledged (origin %u). The same "
                 "command with --origin %u --resume sends the mark again\n",
                 name, static_cast<unsigned long long>(stats.acknowledged), p.origin(), p.origin());
  } else {
    std::fprintf(stderr,
                 "hoprelay send: interrupted (%s): %llu message%s sent, %llu acknowledged (origin "
                 "%u). No end-of-stream mark was sent: the consumers wait for the rest of the "
                 "stream. To resume, send the same input again with --origin %u --resume (%s)\n",
                 name, static_cast<unsigned long long>(stats.sent), stats.sent == 1 ? "" : "s",
                 static_cast<unsigned long long>(stats.acknowledged), p.origin(), p.origin(),
                 run_head ? "the head ran in this command and starts afresh: everything is sent "
                            "again, and the consumers drop what they had"
                          : "the messages the head has already are not sent again");
  }
  return 128 + stop_signal();
}

}  // namespace

int run_send(const SendOptions& o) {
  hoprelay_producer_options po;
  hoprelay_producer_options_init(&po);
  po.origin = o.origin;
  po.first_seq = o.first_seq;
  po.connect_timeout_ms = o.connect_timeout_ms;
  po.run_head = o.run_head;
  if (!o.tls.cert.empty()) {
    po.tls_cert = o.tls.cert.c_str();
    po.tls_key = o.tls.key.c_str();
    po.tls_ca = o.tls.ca.c_str();
  }
  po.log = log_line;
  po.log_level = HOPRELAY_CLIENT_LOG_DEBUG;  // spdlog's level filters
  Outcomes outcomes(o.resume);
  po.on_outcome = &Outcomes::on_outcome;
  po.outcome_user = &outcomes;
  int input = -1;
  if (o.stdin_stream) input = 0;
  if (!o.file.empty()) {
    input = ::open(o.file.c_str(), O_RDONLY | O_CLOEXEC);
    if (input < 0) {
      std::fprintf(stderr, "hoprelay send: cannot read %s: %s\n", o.file.c_str(),
                   std::strerror(errno));
      return 1;
    }
  }
  // Outside the try: a failure reports how far the producer got.
  std::optional<Producer> producer;
  // From the moment the producer is open: a Ctrl-C while it connects has sent nothing, and
  // ends the command at once as usual.
  std::optional<StopSignals> signals;
  bool ending = false;  // waiting for the end mark's acknowledgement
  try {
    WaitingNotice waiting(o);
    Producer& p = producer.emplace(o.topology, o.head, &po);
    waiting.stop();
    signals.emplace();
    StallNotice notice(p, o.topology);
    Sender s(p, o, notice);
    auto t0 = Clock::now();
    if (input >= 0) {
      send_stream(p, s, o, input);
    } else {
      send_generated(p, s, o);
    }
    int rc = in_steps([&p](int step) { return p.flush(step); }, &notice);
    if (rc != HOPRELAY_OK) throw_last(rc);
    double secs = std::chrono::duration<double>(Clock::now() - t0).count();
    auto stats = p.stats();
    uint32_t origin = p.origin();
    // Every message is acknowledged (the flush above): what close waits for is the end-of-
    // stream mark's acknowledgement. Its failure is reported after the summary, with the
    // counts taken here (the handle is gone after close).
    std::optional<Error> closed;
    stop_if_signalled();  // not an end mark after a Ctrl-C
    try {
      ending = true;
      close_in_steps(p, o.close_timeout_ms);
    } catch (const Error& e) {
      closed = e;
    }
    if (secs <= 0) secs = 1e-9;
    const uint64_t delivered = stats.acknowledged - outcomes.dropped() - outcomes.repeats();
    if (!o.json)
      std::printf("sent %llu messages, %llu bytes in %.3f s: %.0f msg/s, %.3f Gb/s (origin %u)%s\n",
                  static_cast<unsigned long long>(stats.acknowledged),
                  static_cast<unsigned long long>(s.bytes()), secs,
                  double(stats.acknowledged) / secs, double(s.bytes()) * 8 / secs / 1e9, origin,
                  delivered == stats.acknowledged
                      ? ""
                      : (": " + std::to_string(delivered) + " delivered, " +
                         std::to_string(outcomes.dropped()) + " dropped, " +
                         std::to_string(outcomes.repeats()) +
                         (o.resume ? " the head had already (resumed)" : " repeats"))
                            .c_str());
    if ((stats.reconnects || stats.failovers) && !o.json) {
      std::printf(
          "the link to the head came back %llu time%s; the producer moved between the head "
          "and its standby %llu time%s\n",
          static_cast<unsigned long long>(stats.reconnects), stats.reconnects == 1 ? "" : "s",
          static_cast<unsigned long long>(stats.failovers), stats.failovers == 1 ? "" : "s");
    }
    outcomes.print(stats.sent, delivered, !o.json);
    // Every host has it once nothing of it waits in a spool (--wait-all waits for that).
    SpoolWaitResult waited;
    const bool everywhere = o.wait_all && !closed ? wait_all(o, outcomes.spooled(), waited)
                                                  : outcomes.spooled().empty();
    int code = 0;
    if (closed) {
      code = exit_code_of(closed->status());
    } else if (outcomes.dropped() || (outcomes.repeats() && !o.resume)) {
      code = 3;
    } else if (!everywhere && o.wait_all) {
      code = 4;
    }
    if (o.json) {
      print_json(origin, stats.acknowledged, s.bytes(), secs, delivered, outcomes, o.wait_all,
                 waited, everywhere && !closed && outcomes.dropped() == 0, code);
    }
    if (closed) {
      std::fprintf(stderr,
                   "hoprelay send: %s: every message was acknowledged, the end-of-stream mark %s\n",
                   closed->what(),
                   closed->status() != HOPRELAY_ETIMEDOUT
                       ? "not"
                       : "not yet. It is acknowledged once every consumer has it: a consumer that "
                         "is not running, a branch that is down, or a node where branches join "
                         "(it waits up to its peer_down_timeout, 30 s unless set, for each "
                         "branch's copy) keeps it. --close-timeout SECONDS waits longer (0: as "
                         "long as it takes)");
      return code;
    }
    if (code != 0) return code;
  } catch (const Interrupted&) {
    return report_interrupted(*producer, ending, o.run_head);
  } catch (const Error& e) {
    // The library names its call ("send: 5000000 bytes is more than..."): this one is send.
    std::string_view what = e.what();
    if (what.starts_with("send: ")) what.remove_prefix(6);
    if (producer) {
      auto stats = producer->stats();
      std::fprintf(stderr, "hoprelay send: %.*s (%llu message%s sent, %llu acknowledged)\n",
                   static_cast<int>(what.size()), what.data(),
                   static_cast<unsigned long long>(stats.sent), stats.sent == 1 ? "" : "s",
                   static_cast<unsigned long long>(stats.acknowledged));
    } else {
      std::fprintf(stderr, "hoprelay send: %.*s\n", static_cast<int>(what.size()), what.data());
    }
    return exit_code_of(e.status());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hoprelay send: %s\n", e.what());
    return 1;
  }
  return 0;
}

}  // namespace hoprelay::client
