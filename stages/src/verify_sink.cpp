// verify-sink: a leaf that checks every payload against the pattern `hoprelay send` generates
// and counts, per origin, what was received once, received again (duplicates), never
// received below the highest sequence seen (missing), damaged (corrupt), and received for the
// first time after a later message of its origin (reordered: a path keeps each origin's order).
//
// It survives its own crash: every verdict is appended to REPORT.verdicts (one write() before the
// stage returns, i.e. before the message is acknowledged upstream), and a restarted sink
// resumes from that log. A message the previous run consumed but had not acknowledged when it
// died is replayed by the upstream; it is counted as `redelivered`, not as a duplicate:
// duplicates are messages delivered twice within one run, which the node's deduplication must
// make impossible. Either way the copy is consumed (FORWARD at a leaf): the message itself was
// delivered, so its outcome upstream is "delivered", not a drop. The report (REPORT, JSON) is
// rewritten atomically (temp file + rename) once a second and at shutdown.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "builtin.h"
#include "hoprelay/stages/pattern.h"

namespace hoprelay::stages {
namespace {

struct OriginCounts {
  uint64_t received = 0;
  uint64_t duplicates = 0;
  uint64_t redelivered = 0;
  uint64_t corrupt = 0;
  uint64_t reordered = 0;
  uint64_t bytes = 0;
  uint64_t next_seq = 0;       // one past the highest sequence seen
  std::vector<uint64_t> seen;  // bitmap by sequence: received in any run
  std::vector<uint64_t> now;   // bitmap by sequence: received in this run
  uint64_t missing() const { return next_seq - received; }
};

enum class Verdict : uint32_t { kReceived = 1, kDuplicate = 2, kCorrupt = 3, kRedelivered = 4 };

// One record of REPORT.verdicts (binary, hence not .log): what happened to one message.
struct LogRecord {
  uint32_t verdict;
  uint32_t origin;
  uint64_t seq;
  uint64_t length;
};
static_assert(sizeof(LogRecord) == 24);

// The sequence numbers it tracks per origin, from 0: two bitmaps of 32 MiB at most. A message
// past it (`hoprelay send --first-seq` far out) is an error that says so, not a bitmap that
// takes the host's memory.
constexpr uint64_t kMaxSeq = uint64_t{1} << 28;

bool test_and_set(std::vector<uint64_t>& bits, uint64_t seq) {
  size_t word = seq / 64;
  if (word >= bits.size()) {
    bits.resize(std::min<size_t>(std::max(word + 1, bits.size() * 2), kMaxSeq / 64), 0);
  }
  uint64_t bit = uint64_t{1} << (seq % 64);
  bool was = bits[word] & bit;
  bits[word] |= bit;
  return was;
}

class VerifySink {
 public:
  explicit VerifySink(const StageArgs& args) : report_(args.get_or("report", "")) {
    if (report_.empty()) throw std::invalid_argument("verify-sink needs a report parameter");
    const std::string crc = args.get_or("crc32c", "checked");
    if (crc != "checked" && crc != "required") {
      throw std::invalid_argument(
          "verify-sink: crc32c must be \"checked\" or \"required\", not \"" + crc + "\"");
    }
    crc_required_ = crc == "required";
    std::string log_path = report_ + ".verdicts";
    log_fd_ = ::open(log_path.c_str(), O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    // Named by the report, the parameter the operator wrote (the verdicts file goes next to it).
    if (log_fd_ < 0) {
      throw std::invalid_argument("cannot write report file " + report_ + ": " +
                                  std::strerror(errno) + " (creating " + log_path + ")");
    }
    resume();
    if (resumed_) {
      args.log(HOPRELAY_LOG_INFO, "resuming from " + log_path + " (" + std::to_string(resumed_) +
                                      " verdicts of earlier runs)");
    }
    // Fail at start, not at the first flush, when the report cannot be written.
    if (!write_report()) throw std::invalid_argument("cannot write report file " + report_);
  }
  ~VerifySink() { ::close(log_fd_); }
  VerifySink(const VerifySink&) = delete;
  VerifySink& operator=(const VerifySink&) = delete;

  hoprelay_verdict process(hoprelay_msg& m) {
    if (m.flags & HOPRELAY_MSG_ZSTD) {
      // Bytes it cannot check: counted as corrupt (the report shows it), and said why.
      record(Verdict::kCorrupt, m.origin, m.seq, m.length);
      why_ = kCompressedPayload;
      return HOPRELAY_ERROR;
    }
    why_ = nullptr;
    std::span<const std::byte> payload{reinterpret_cast<const std::byte*>(m.data), m.length};
    bool intact = !crc_required_ || (m.flags & HOPRELAY_MSG_CRC32C_TRAILER);
    if (!intact) why_ = "no CRC32C trailer (crc32c = \"required\")";
    if (m.flags & HOPRELAY_MSG_CRC32C_TRAILER) {
      uint32_t want = 0;
      intact = m.length >= 4;
      if (intact) {
        std::memcpy(&want, m.data + m.length - 4, 4);
        payload = payload.first(m.length - 4);
        intact = crc32c(payload) == want;
      }
    }
    uint32_t origin = 0;
    uint64_t seq = 0;
    if (!intact || check_pattern(payload, origin, seq) != PatternCheck::kOk || origin != m.origin ||
        seq != m.seq) {
      record(Verdict::kCorrupt, m.origin, m.seq, m.length);
      return HOPRELAY_ERROR;
    }
    if (seq >= kMaxSeq) {
      why_ = "sequence number past the 2^28 per origin that verify-sink tracks (it counts from 0)";
      return HOPRELAY_ERROR;
    }
    Verdict v = apply(Verdict::kReceived, origin, seq, payload.size(), true);
    if (!log(v, origin, seq, payload.size())) return HOPRELAY_ERROR;
    return HOPRELAY_FORWARD;  // received, or a copy of what was received (counted above)
  }

  void flush() {
    if (dirty_ && write_report()) dirty_ = false;
  }
  const char* last_error() const { return why_; }

 private:
  // Applies one message to the counts. `live`: seen by this run (false while resuming from
  // the log of an earlier run). Returns what it was.
  Verdict apply(Verdict v, uint32_t origin, uint64_t seq, uint64_t length, bool live) {
    OriginCounts& c = counts_for(origin);
    dirty_ = true;
    if (v == Verdict::kCorrupt) {
      c.corrupt++;
      return v;
    }
    if (v == Verdict::kDuplicate) {
      c.duplicates++;
      return v;
    }
    if (v == Verdict::kRedelivered) {
      c.redelivered++;
      return v;
    }
    bool seen_before = test_and_set(c.seen, seq);
    if (live && test_and_set(c.now, seq)) {
      c.duplicates++;  // twice in this run: the node's deduplication failed
      return Verdict::kDuplicate;
    }
    if (seen_before) {
      c.redelivered++;  // consumed by an earlier run, replayed after it died
      return Verdict::kRedelivered;
    }
    c.received++;
    c.bytes += length;
    if (live && seq + 1 < c.next_seq) c.reordered++;
    if (seq + 1 > c.next_seq) c.next_seq = seq + 1;
    return Verdict::kReceived;
  }

  void record(Verdict v, uint32_t origin, uint64_t seq, uint64_t length) {
    apply(v, origin, seq, length, true);
    log(v, origin, seq, length);
  }

  // Appended before the stage returns: a crash right after still finds it in the log.
  bool log(Verdict v, uint32_t origin, uint64_t seq, uint64_t length) {
    LogRecord r{static_cast<uint32_t>(v), origin, seq, length};
    return ::write(log_fd_, &r, sizeof(r)) == static_cast<ssize_t>(sizeof(r));
  }

  void resume() {
    LogRecord r;
    uint64_t n = 0;
    while (::read(log_fd_, &r, sizeof(r)) == static_cast<ssize_t>(sizeof(r))) {
      // A record torn by a full disk shifts the ones after it: what cannot be a record is
      // skipped rather than trusted (its seq could ask for any amount of memory).
      if (r.verdict < 1 || r.verdict > 4 || r.seq >= kMaxSeq) continue;
      apply(static_cast<Verdict>(r.verdict), r.origin, r.seq, r.length, false);
      ++n;
    }
    resumed_ = n;
  }

  // One lookup per message would be a map walk; the last origin is almost always the same.
  OriginCounts& counts_for(uint32_t origin) {
    if (!last_ || last_origin_ != origin) {
      last_ = &origins_[origin];
      last_origin_ = origin;
    }
    return *last_;
  }

  bool write_report() {
    OriginCounts total;
    uint64_t missing_total = 0;
    std::string per_origin;
    for (const auto& [id, c] : origins_) {
      total.received += c.received;
      total.duplicates += c.duplicates;
      total.redelivered += c.redelivered;
      total.corrupt += c.corrupt;
      total.reordered += c.reordered;
      total.bytes += c.bytes;
      uint64_t missing = c.missing();
      missing_total += missing;
      per_origin += (per_origin.empty() ? "" : ",\n") +
                    fmt_counts("    \"" + std::to_string(id) + "\"", c, missing);
    }
    std::string json = "{\n  \"received\": " + std::to_string(total.received) +
                       ",\n  \"duplicates\": " + std::to_string(total.duplicates) +
                       ",\n  \"missing\": " + std::to_string(missing_total) +
                       ",\n  \"corrupt\": " + std::to_string(total.corrupt) +
                       ",\n  \"redelivered\": " + std::to_string(total.redelivered) +
                       ",\n  \"reordered\": " + std::to_string(total.reordered) +
                       ",\n  \"bytes\": " + std::to_string(total.bytes) + ",\n  \"origins\": {" +
                       (per_origin.empty() ? "" : "\n" + per_origin + "\n  ") + "}\n}\n";
    std::string tmp = report_ + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool ok = ::write(fd, json.data(), json.size()) == static_cast<ssize_t>(json.size());
    ok = (::close(fd) == 0) && ok;
    return ok && std::rename(tmp.c_str(), report_.c_str()) == 0;
  }

  static std::string fmt_counts(const std::string& key, const OriginCounts& c, uint64_t m) {
    return key + ": {\"received\": " + std::to_string(c.received) +
           ", \"duplicates\": " + std::to_string(c.duplicates) +
           ", \"missing\": " + std::to_string(m) + ", \"corrupt\": " + std::to_string(c.corrupt) +
           ", \"redelivered\": " + std::to_string(c.redelivered) +
           ", \"reordered\": " + std::to_string(c.reordered) +
           ", \"bytes\": " + std::to_string(c.bytes) + "}";
  }

  std::string report_;
  int log_fd_ = -1;
  uint64_t resumed_ = 0;  // records read back from an earlier run's log
  std::map<uint32_t, OriginCounts> origins_;
  OriginCounts* last_ = nullptr;
  uint32_t last_origin_ = 0;
  bool dirty_ = true;
  const char* why_ = nullptr;
  bool crc_required_ = false;
};

constexpr const char* kKeys[] = {"report", "crc32c", nullptr};
constexpr auto kDescriptor =
    BuiltinAdaptor<VerifySink>::make("verify-sink", kKeys, HOPRELAY_STAGE_LOCAL);

}  // namespace

const hoprelay_stage_descriptor* verify_sink_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
