// passthrough: forwards every message unchanged. The smallest possible stage.
#include "builtin.h"

namespace hoprelay::stages {
namespace {

class Passthrough {
 public:
  explicit Passthrough(const StageArgs&) {}
  hoprelay_verdict process(hoprelay_msg&) { return HOPRELAY_FORWARD; }
  void flush() {}
};

constexpr const char* kKeys[] = {nullptr};
// Chunk by chunk: it does not look at the bytes, so a relay running it is cut-through. It
// has no state, so one instance serves every thread.
constexpr auto kDescriptor = BuiltinAdaptor<Passthrough>::make(
    "passthrough", kKeys,
    HOPRELAY_STAGE_CHUNKS | HOPRELAY_STAGE_THREADSAFE | HOPRELAY_STAGE_TRANSFORM);

}  // namespace

const hoprelay_stage_descriptor* passthrough_descriptor() {
  return &kDescriptor;
}

}  // namespace hoprelay::stages
