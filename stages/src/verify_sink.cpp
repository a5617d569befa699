// verify-sink: a leaf that checks every payload against the pattern `hoprelay send` generates
// and counts, per origin, what was received once, received again (duplicates), never
// received below the highest sequence seen (missing) and damaged (corrupt). The counts are
// rewritten atomically (temp file + rename) to the JSON file named by `report` at every
// flush: once a second and at shutdown.
#include <fcntl.h>
#include <unistd.h>

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
  uint64_t corrupt = 0;
  uint64_t bytes = 0;
  uint64_t next_seq = 0;       // one past the highest sequence seen
  std::vector<uint64_t> seen;  // bitmap by sequence
  uint64_t missing() const { return next_seq - received; }
};

class VerifySink {
 public:
  explicit VerifySink(const StageArgs& args) : report_(args.get_or("report", "")) {
    if (report_.empty()) throw std::invalid_argument("verify-sink needs a report parameter");
    // Fail at start, not at the first flush, when the report cannot be written.
    if (!write_report()) throw std::invalid_argument("cannot write report file " + report_);
  }

  hoprelay_verdict process(hoprelay_msg& m) {
    std::span<const std::byte> payload{reinterpret_cast<const std::byte*>(m.data), m.length};
    bool intact = true;
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
      origins_[m.origin].corrupt++;
      dirty_ = true;
      return HOPRELAY_ERROR;
    }
    OriginCounts& c = counts_for(origin);
    dirty_ = true;
    size_t word = seq / 64;
    if (word >= c.seen.size()) c.seen.resize(std::max(word + 1, c.seen.size() * 2), 0);
    uint64_t bit = uint64_t{1} << (seq % 64);
    if (c.seen[word] & bit) {
      c.duplicates++;
      return HOPRELAY_DROP;
    }
    c.seen[word] |= bit;
    c.received++;
    c.bytes += payload.size();
    if (seq + 1 > c.next_seq) c.next_seq = seq + 1;
    return HOPRELAY_FORWARD;
  }

  void flush() {
    if (dirty_ && write_report()) dirty_ = false;
  }

 private:
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
      total.corrupt += c.corrupt;
      total.bytes += c.bytes;
      uint64_t missing = c.missing();
      missing_total += missing;
      per_origin += (per_origin.empty() ? "" : ",\n") +
                    fmt_counts("    \"" + std::to_string(id) + "\"", c.received, c.duplicates,
                               missing, c.corrupt, c.bytes);
    }
    std::string json = "{\n  \"received\": " + std::to_string(total.received) +
                       ",\n  \"duplicates\": " + std::to_string(total.duplicates) +
                       ",\n  \"missing\": " + std::to_string(missing_total) +
                       ",\n  \"corrupt\": " + std::to_string(total.corrupt) +
                       ",\n  \"bytes\": " + std::to_string(total.bytes) + ",\n  \"origins\": {" +
                       (per_origin.empty() ? "" : "\n" + per_origin + "\n  ") + "}\n}\n";
    std::string tmp = report_ + ".tmp";
    int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return false;
    bool ok = ::write(fd, json.data(), json.size()) == static_cast<ssize_t>(json.size());
    ok = (::close(fd) == 0) && ok;
    return ok && std::rename(tmp.c_str(), report_.c_str()) == 0;
  }

  static std::string fmt_counts(const std::string& key, uint64_t r, uint64_t d, uint64_t m,
                                uint64_t c, uint64_t b) {
    return key + ": {\"received\": " + std::to_string(r) +
           ", \"duplicates\": " + std::to_string(d) + ", \"missing\": " + std::to_string(m) +
           ", \"corrupt\": " + std::to_string(c) + ", \"bytes\": " + std::to_string(b) + "}";
  }

  std::string report_;
  std::map<uint32_t, OriginCounts> origins_;
  OriginCounts* last_ = nullptr;
  uint32_t last_origin_ = 0;
  bool dirty_ = true;
};

constexpr const char* kKeys[] = {"report", nullptr};
constexpr auto kDescriptor = BuiltinAdaptor<VerifySink>::make("verify-sink", kKeys);

}  // namespace

const hoprelay_stage_descriptor* verify_sink_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
