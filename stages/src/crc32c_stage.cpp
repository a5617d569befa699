// crc32c: `mode = "stamp"` appends a CRC32C trailer over the payload (and flags the message so
// every later hop and the sink know it is there); `mode = "verify"` checks and strips it.
// A mismatch or a missing trailer is a stage error: the node counts it and drops the message.
#include <cstring>
#include <stdexcept>

#include "builtin.h"
#include "hoprelay/stages/pattern.h"

namespace hoprelay::stages {
namespace {

class Crc32cStage {
 public:
  explicit Crc32cStage(const StageArgs& args) {
    std::string mode = args.get_or("mode", "stamp");
    if (mode == "stamp") {
      stamp_ = true;
    } else if (mode != "verify") {
      throw std::invalid_argument("mode must be \"stamp\" or \"verify\", not \"" + mode + "\"");
    }
  }

  hoprelay_verdict process(hoprelay_msg& m) {
    if (stamp_) {
      if (m.flags & HOPRELAY_MSG_CRC32C_TRAILER) return HOPRELAY_FORWARD;  // stamped upstream
      if (m.capacity - m.length < 4) {                                     // no room in the slot
        why_ = "message leaves no room for the 4-byte trailer";
        return HOPRELAY_ERROR;
      }
      uint32_t c = crc32c({reinterpret_cast<const std::byte*>(m.data), m.length});
      std::memcpy(m.data + m.length, &c, 4);
      m.length += 4;
      m.flags |= HOPRELAY_MSG_CRC32C_TRAILER;
      return HOPRELAY_FORWARD;
    }
    if (!(m.flags & HOPRELAY_MSG_CRC32C_TRAILER) || m.length < 4) {
      why_ = "message carries no CRC32C trailer (no crc32c stamp upstream?)";
      return HOPRELAY_ERROR;
    }
    uint32_t want;
    std::memcpy(&want, m.data + m.length - 4, 4);
    if (crc32c({reinterpret_cast<const std::byte*>(m.data), m.length - 4}) != want) {
      // Stamped, then compressed: the trailer is inside the compressed bytes (compressed, then
      // stamped, it is outside them and matches).
      why_ = (m.flags & HOPRELAY_MSG_ZSTD)
                 ? "zstd-compressed since it was stamped: put a zstd stage with mode = "
                   "\"decompress\" before this crc32c verify"
                 : "CRC32C mismatch: the message was corrupted after it was stamped";
      return HOPRELAY_ERROR;
    }
    m.length -= 4;
    m.flags &= ~HOPRELAY_MSG_CRC32C_TRAILER;
    return HOPRELAY_FORWARD;
  }
  void flush() {}
  const char* last_error() const { return why_; }

 private:
  bool stamp_ = false;
  const char* why_ = nullptr;
};

constexpr const char* kKeys[] = {"mode", nullptr};
// Per thread: the only state is the reason of the last refusal (last_error).
constexpr auto kDescriptor = BuiltinAdaptor<Crc32cStage>::make(
    "crc32c", kKeys, HOPRELAY_STAGE_PER_THREAD | HOPRELAY_STAGE_TRANSFORM);

}  // namespace

const hoprelay_stage_descriptor* crc32c_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
