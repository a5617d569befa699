// How the built-in stages are written: each is a plain C++ class with
//   explicit Impl(const StageArgs&);          // throws std::exception to refuse parameters
//   hoprelay_verdict process(hoprelay_msg&);  // the hot path
//   void flush();                             // optional work once a second and at shutdown
//   const char* last_error();                 // optional: why the last ERROR / DROP
// and BuiltinAdaptor turns it into a hoprelay_stage_descriptor, so the daemon reaches the
// built-ins through exactly the C ABI an external plugin uses. The adaptor owns the C/C++
// boundary (exception catching, casts) so the stage classes hold only their own logic.
#pragma once

#include <cstdio>
#include <exception>
#include <string>
#include <string_view>

#include "hoprelay/stage_abi.h"

namespace hoprelay::stages {

// Read access to a stage's parameters and logger, as handed over by the daemon.
class StageArgs {
 public:
  explicit StageArgs(const hoprelay_stage_config& config) : config_(config) {}
  const char* get(std::string_view key) const {
    for (size_t i = 0; i < config_.n_params; ++i) {
      if (key == config_.params[i].key) return config_.params[i].value;
    }
    return nullptr;
  }
  std::string get_or(std::string_view key, std::string_view fallback) const {
    const char* v = get(key);
    return v ? std::string(v) : std::string(fallback);
  }
  const char* node() const { return config_.node; }
  void log(int level, const std::string& message) const {
    if (config_.log) config_.log(config_.log_ctx, level, message.c_str());
  }

 private:
  const hoprelay_stage_config& config_;
};

// What a sink that reads the bytes says of a payload still zstd-compressed (HOPRELAY_MSG_ZSTD).
inline constexpr const char* kCompressedPayload =
    "zstd-compressed: put a zstd stage with mode = \"decompress\" before this sink";

template <class Impl>
struct BuiltinAdaptor {
  static void* create(const hoprelay_stage_config* config, char* err, size_t err_len) {
    try {
      return new Impl(StageArgs(*config));
    } catch (const std::exception& e) {
      std::snprintf(err, err_len, "%s", e.what());
      return nullptr;
    }
  }
  static hoprelay_verdict process(void* self, hoprelay_msg* msg) {
    try {
      hoprelay_verdict v = static_cast<Impl*>(self)->process(*msg);
      if (v != HOPRELAY_FORWARD && thrown().self == self) thrown().self = nullptr;
      return v;
    } catch (const std::exception& e) {
      // Nothing may cross the C ABI into the node's event loop: one message's failure (an
      // allocation, say) is that message's error, with the reason, not the daemon's end.
      thrown() = {self, e.what()};
      return HOPRELAY_ERROR;
    }
  }
  static void flush(void* self) {
    try {
      static_cast<Impl*>(self)->flush();
    } catch (...) {
      // A report that cannot be written now is retried at the next flush.
    }
  }
  static void destroy(void* self) { delete static_cast<Impl*>(self); }
  static const char* last_error(void* self) {
    if (thrown().self == self) return thrown().what.c_str();
    if constexpr (requires(Impl & i) { i.last_error(); }) {
      return static_cast<Impl*>(self)->last_error();
    } else {
      return nullptr;
    }
  }

  // The exception the last process() on this thread ended with, for last_error(), which the
  // node calls right after it on the same thread.
  struct Thrown {
    void* self = nullptr;
    std::string what;
  };
  static Thrown& thrown() {
    thread_local Thrown t;
    return t;
  }

  static constexpr hoprelay_stage_descriptor make(const char* name, const char* const* keys,
                                                  uint32_t caps = 0) {
    return {HOPRELAY_STAGE_ABI_MAJOR,
            HOPRELAY_STAGE_ABI_MINOR,
            sizeof(hoprelay_stage_descriptor),
            name,
            keys,
            &create,
            &process,
            &flush,
            &destroy,
            caps,
            &last_error};
  }
};

const hoprelay_stage_descriptor* passthrough_descriptor();
const hoprelay_stage_descriptor* crc32c_descriptor();
const hoprelay_stage_descriptor* verify_sink_descriptor();
const hoprelay_stage_descriptor* file_sink_descriptor();
const hoprelay_stage_descriptor* zstd_descriptor();

}  // namespace hoprelay::stages
