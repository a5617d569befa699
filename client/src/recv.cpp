#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <vector>

#include "hoprelay/client.hpp"
#include "hoprelay/stages/position_file.h"
#include "spdlog/spdlog.h"
#include "stop_signals.h"
#include "streams.h"

namespace hoprelay::client {
namespace {

// Output through a buffer: one write(2) per megabyte, not per message.
class Output {
 public:
  explicit Output(int fd) : fd_(fd) { buf_.reserve(kSize); }
  ~Output() {
    try {
      flush();
    } catch (const std::exception&) {
      // Unwinding from the error that stopped the run, which is what gets reported; the
      // messages of these bytes were not released, so they come again.
    }
  }
  // True when what was buffered before went out (written to the kernel) on the way.
  bool put(const void* data, size_t n) {
    const bool wrote = !buf_.empty() && buf_.size() + n > kSize;
    if (wrote) flush();
    if (n >= kSize) {
      write_all(static_cast<const std::byte*>(data), n);
      return wrote;
    }
    auto* p = static_cast<const std::byte*>(data);
    buf_.insert(buf_.end(), p, p + n);
    return wrote;
  }
  void flush() {
    write_all(buf_.data(), buf_.size());
    buf_.clear();
  }

 private:
  static constexpr size_t kSize = 1 << 20;
  void write_all(const std::byte* p, size_t n) {
    while (n > 0) {
      ssize_t w = ::write(fd_, p, n);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) throw std::runtime_error(std::string("write: ") + std::strerror(errno));
      p += w;
      n -= size_t(w);
    }
  }
  int fd_;
  std::vector<std::byte> buf_;
};

// What one origin's stream looked like at this consumer.
struct Stream {
  uint64_t first = 0;            // where the stream starts here: 0, or the durable position
  uint64_t next = 0;             // one past the highest seen
  uint64_t lowest = UINT64_MAX;  // the lowest message seen
  uint64_t messages = 0;
  bool ended = false;
  // Sequence numbers never seen (dropped upstream). Counted from the range, not at each jump:
  // where a round-robin split joins again, a late message fills a gap already passed.
  uint64_t missing() const { return next > first + messages ? next - first - messages : 0; }
  // Of those, the ones before the first message seen (first..lowest-1; none when a late one
  // came from before where a durable run started).
  uint64_t missing_before() const {
    const uint64_t end = messages ? lowest : next;
    return end > first ? end - first : 0;
  }
};

// A durable recv's mark in its state dir, made durable before the first byte it writes to its
// output: bytes in the output with no position recorded are then its own, never acknowledged
// (they come again), not a recv's without --state-dir (acknowledged, gone).
std::filesystem::path output_marker(const std::string& state_dir) {
  return std::filesystem::path(state_dir) / "recv-output";
}

void mark_output(const std::string& state_dir, const std::string& output) {
  const auto path = output_marker(state_dir);
  if (std::filesystem::exists(path)) return;
  const std::string text = std::filesystem::absolute(output).string() + "\n";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == ssize_t(text.size()) &&
            ::fdatasync(fd) == 0;
  const int err = errno;
  if (fd >= 0) ::close(fd);
  if (!ok) {
    throw std::runtime_error("cannot write " + path.string() + ": " + std::strerror(err));
  }
  stages::sync_directory_entry(path.string());
}

}  // namespace

int run_recv(const RecvOptions& o) {
  hoprelay_consumer_options co;
  hoprelay_consumer_options_init(&co);
  co.log = log_line;
  co.log_level = HOPRELAY_CLIENT_LOG_DEBUG;
  const bool durable = !o.state_dir.empty();
  if (durable && o.output.empty()) {
    std::fprintf(stderr,
                 "hoprelay recv: --state-dir needs --output FILE (a file it can cut back "
                 "to the last durable position when it restarts)\n");
    return 2;
  }
  if (durable) {
    // A durable recv keeps its output as long as its position says, and a state directory
    // with no position yet says 0 bytes: a file with bytes in it would be cut to nothing (a
    // recv run without --state-dir before, whose messages were acknowledged and are gone).
    // No position yet: no positions file, or an empty one (the consumer creates it when it
    // opens, so a durable recv stopped before its first message leaves one). Unless a recv
    // of this state dir wrote the output (its marker, written before its first byte): then
    // those bytes were never recorded, so never acknowledged (it was killed before its first
    // commit), and they come again: cut, as always.
    struct stat st {};
    std::error_code ec;
    const auto positions = std::filesystem::path(o.state_dir) / "positions";
    const bool no_position =
        !std::filesystem::exists(positions, ec) || std::filesystem::file_size(positions, ec) == 0;
    const bool ours = std::filesystem::exists(output_marker(o.state_dir), ec);
    if (no_position && !ours && ::stat(o.output.c_str(), &st) == 0 && st.st_size > 0) {
      std::fprintf(stderr,
                   "hoprelay recv: %s holds %lld bytes and %s no position yet: a recv with a "
                   "new --state-dir starts its output afresh and would cut it to 0 bytes. A "
                   "--state-dir cannot go on after a recv that ran without it (what that one "
                   "took is acknowledged); give another --output, or remove %s yourself\n",
                   o.output.c_str(), static_cast<long long>(st.st_size), o.state_dir.c_str(),
                   o.output.c_str());
      return 2;
    }
    // The marker names the one output this state dir's position is of: another output (the
    // next file, given the same --state-dir) would be cut to that position and appended to,
    // or refused as shorter than it. Compared as files, so that another spelling of the same
    // path passes; a marked output that no longer exists (moved) is not compared.
    if (ours) {
      std::ifstream marker(output_marker(o.state_dir));
      std::string marked;
      std::getline(marker, marked);
      struct stat ms {};
      struct stat os {};
      if (!marked.empty() && ::stat(marked.c_str(), &ms) == 0 &&
          (::stat(o.output.c_str(), &os) != 0 || ms.st_dev != os.st_dev ||
           ms.st_ino != os.st_ino)) {
        std::fprintf(stderr,
                     "hoprelay recv: %s keeps the position of %s, not of %s: a state dir "
                     "serves one output. Give --output %s to go on with it, or a new "
                     "--state-dir for another output\n",
                     o.state_dir.c_str(), marked.c_str(), o.output.c_str(), marked.c_str());
        return 2;
      }
    }
    co.state_dir = o.state_dir.c_str();
  }
  if (!o.tls.cert.empty()) {
    co.tls_cert = o.tls.cert.c_str();
    co.tls_key = o.tls.key.c_str();
    co.tls_ca = o.tls.ca.c_str();
  }
  std::map<uint32_t, Stream> streams;
  uint64_t messages = 0, bytes = 0, ended = 0;
  int exit_code = 0;
  int fd = 1;
  // From the moment the consumer is open: Ctrl-C or SIGTERM then stops the loop below, and
  // what was received is written and released (stop_signals.h).
  std::optional<StopSignals> signals;
  try {
    Consumer c(o.topology, o.node, &co);
    signals.emplace();
    if (!o.output.empty()) {
      // With a durable position the file is kept, cut back to what was recorded: what came
      // after it was not acknowledged, and comes again.
      fd = ::open(o.output.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | (durable ? 0 : O_TRUNC), 0644);
      if (fd < 0) {
        throw std::runtime_error("cannot write " + o.output + ": " + std::strerror(errno));
      }
      if (durable) {
        stages::sync_directory_entry(o.output);  // created now, it must outlive a power loss
        const off_t keep = off_t(c.app_position());
        struct stat st {};
        if (::fstat(fd, &st) == 0 && st.st_size < keep) {
          // Replaced or cut since: extending it would put zeros where records were.
          throw std::runtime_error(o.output + " holds " + std::to_string(st.st_size) +
                                   " bytes, less than the " + std::to_string(keep) +
                                   " its durable position in " + o.state_dir +
                                   " says were written: restore the file, or give another "
                                   "--state-dir (or remove this one) to start it afresh");
        }
        if (::ftruncate(fd, keep) != 0 || ::lseek(fd, keep, SEEK_SET) != keep) {
          throw std::runtime_error("cannot cut " + o.output + " back to " + std::to_string(keep) +
                                   " bytes: " + std::strerror(errno));
        }
        if (keep > 0) {
          spdlog::info("resuming {} at {} bytes (the last durable position in {})", o.output, keep,
                       o.state_dir);
        }
      }
    }
    Output out(fd);
    uint64_t written = durable ? c.app_position() : 0;  // the output's length
    bool marked = false;  // the state dir says that a recv of it writes this output
    const int timeout = o.timeout_s > 0 ? int(o.timeout_s * 1000) : -1;
    // The messages of a batch are held until their bytes are written (and, with a durable
    // position, durable: one fdatasync per batch), then released (with the output's length):
    // released earlier, a message whose bytes still sat in the buffer when the run ended
    // (a signal, a full disk) would be lost, its producer told it was delivered.
    std::vector<Message> batch;
    // On an error, what is held is not released: it comes again to the next run.
    struct AbandonOnError {
      std::vector<Message>& held;
      ~AbandonOnError() {
        for (Message& m : held) m.abandon();
      }
    } abandon_on_error{batch};
    auto release_batch = [&] {
      out.flush();
      if (durable && ::fdatasync(fd) != 0) {
        throw std::runtime_error("cannot make " + o.output +
                                 " durable (fdatasync): " + std::strerror(errno));
      }
      for (Message& held : batch) {
        if (int r = durable ? held.release_at(written) : (held.release(), HOPRELAY_OK)) {
          throw_last(r);
        }
      }
      batch.clear();
    };
    auto done = [&] { return o.count ? messages >= o.count : ended >= o.streams; };
    // Waits in steps, for the stop signals; --timeout counts from the first empty step.
    using Clock = std::chrono::steady_clock;
    bool idle = false;  // since idle_since, recv found nothing
    Clock::time_point idle_since;
    while (!done() && !stop_signal()) {
      int rc = 0;
      Message m = c.recv(batch.empty() ? kStopStepMs : 0, &rc);
      if (rc == HOPRELAY_EAGAIN && !batch.empty()) {
        release_batch();
        continue;
      }
      if (rc == HOPRELAY_ETIMEDOUT) {
        const auto now = Clock::now();
        if (!idle) idle_since = now - std::chrono::milliseconds(kStopStepMs);
        idle = true;
        if (timeout < 0 || now - idle_since < std::chrono::milliseconds(timeout)) continue;
        std::fprintf(stderr, "hoprelay recv: nothing for %.1f s; giving up\n", o.timeout_s);
        exit_code = 1;
        break;
      }
      if (rc != HOPRELAY_OK) throw_last(rc);
      idle = false;
      batch.push_back(std::move(m));
      const Message& msg = batch.back();
      auto [it, fresh] = streams.try_emplace(msg.origin());
      Stream& s = it->second;
      // A stream starts at 0 (a producer's first sequence number), or for a durable recv where
      // the last run stopped: messages dropped before the first that arrives are missing too.
      if (fresh) s.first = s.next = durable ? c.resume_seq(msg.origin()) : 0;
      if (msg.end()) {
        if (!s.ended) ++ended;
        s.ended = true;
        s.next = std::max(s.next, msg.seq());  // the end mark's seq: the stream's length
        continue;
      }
      s.next = std::max(s.next, msg.seq() + 1);
      s.lowest = std::min(s.lowest, msg.seq());
      ++s.messages;
      ++messages;
      auto data = msg.data();
      bytes += data.size();
      if (durable && !marked) {
        mark_output(o.state_dir, o.output);
        marked = true;
      }
      bool wrote = false;  // the bytes of every message before this one are written
      if (o.framing == Framing::kLength) {
        uint32_t n = uint32_t(data.size());
        unsigned char len[4] = {uint8_t(n >> 24), uint8_t(n >> 16), uint8_t(n >> 8), uint8_t(n)};
        wrote |= out.put(len, 4);
        written += 4;
      }
      wrote |= out.put(data.data(), data.size());
      written += data.size();
      if (o.framing == Framing::kLines) {
        wrote |= out.put("\n", 1);
        ++written;
      }
      if (wrote && !durable && batch.size() > 1) {
        // Under a steady stream recv(0) seldom finds nothing: release what is written at
        // every megabyte, not only once the consumer's ring is full of held messages.
        for (auto it = batch.begin(); it != batch.end() - 1; ++it) it->release();
        batch.erase(batch.begin(), batch.end() - 1);
      }
    }
    out.flush();
    if (fd != 1 && ::fsync(fd) != 0 && errno != EINVAL) {
      throw std::runtime_error(std::string("fsync: ") + std::strerror(errno));
    }
    release_batch();
  } catch (const Error& e) {
    std::fprintf(stderr, "hoprelay recv: %s\n", e.what());
    return exit_code_of(e.status());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hoprelay recv: %s\n", e.what());
    return 1;
  }
  if (fd != 1) ::close(fd);
  const bool interrupted = stop_signal() != 0;
  for (const auto& [origin, s] : streams) {
    const std::string range =
        s.messages ? fmt::format("{} messages, seq {}-{}", s.messages, s.lowest, s.next - 1)
                   : std::string("no messages");
    std::string missing;
    if (s.missing()) {
      // Without --state-dir, those before the first one seen are most often not lost at
      // all: an earlier recv of the node took them and did not tell this one where it stopped.
      // With it, the position says where the last run stopped: a gap after it was dropped.
      missing = fmt::format(", {} missing", s.missing());
      if (const uint64_t before = s.missing_before(); !durable && before) {
        const std::string seqs = before == 1
                                     ? fmt::format("seq {}", s.first)
                                     : fmt::format("seq {}-{}", s.first, s.first + before - 1);
        missing += fmt::format(
            " ({} {}: taken by an earlier recv of node {}, or dropped upstream; recvs that "
            "all give the same --state-dir DIR, from the first on, go on where the last one "
            "stopped{})",
            seqs, s.messages ? "before the first this recv got" : "never reached this recv", o.node,
            before < s.missing()
                ? fmt::format("; {} more missing after seq {}", s.missing() - before, s.lowest)
                : "");
      }
    }
    std::fprintf(stderr, "origin %u: %s, %s%s\n", origin, range.c_str(),
                 s.ended ? "ended" : "not ended", missing.c_str());
    if (s.missing() && !interrupted) exit_code = 1;
  }
  // Waiting for whole streams, the output holds the bytes of every origin that sent here,
  // one after another as they came: a stream that did not end (a producer stopped before its
  // end, e.g. an interrupted send whose messages were still on their way, or one still
  // sending) has its messages among the others'. Not what was asked for: said, and exit 1.
  if (!o.count && exit_code == 0 && !interrupted) {
    for (const auto& [origin, s] : streams) {
      if (s.ended || s.messages == 0) continue;
      std::fprintf(stderr,
                   "hoprelay recv: origin %u did not end: its %llu messages are in the output "
                   "among those of the stream%s that did (a producer stopped before its end, "
                   "e.g. an interrupted send whose messages were still on their way, or one "
                   "still sending). Give each producer its own --origin, and recv --streams N "
                   "for N producers\n",
                   origin, static_cast<unsigned long long>(s.messages), o.streams == 1 ? "" : "s");
      exit_code = 1;
    }
  }
  std::fprintf(stderr, "received %llu messages, %llu bytes from %zu streams\n",
               static_cast<unsigned long long>(messages), static_cast<unsigned long long>(bytes),
               streams.size());
  if (interrupted) {
    std::fprintf(stderr,
                 "hoprelay recv: interrupted (%s): what it received is in the output and "
                 "acknowledged; the rest waits upstream for the next recv of node %s%s\n",
                 stop_signal_name(), o.node.c_str(),
                 durable ? ""
                         : " (which, without --state-dir, cannot know where this one stopped "
                           "and counts what this one got as missing; to append the rest to the "
                           "same file, every recv of the node needs the same --state-dir DIR "
                           "and --output FILE from the first on)");
    return 128 + stop_signal();
  }
  return exit_code;
}

}  // namespace hoprelay::client
