// C++ host side of the stage ABI: resolving a plugin spelling to a stage type (built-in or
// dlopen'ed .so) and owning one stage instance.
#pragma once

#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "hoprelay/stage_abi.h"

namespace hoprelay::stages {

using Params = std::vector<std::pair<std::string, std::string>>;

// Why a plugin could not be resolved or an instance not created; the message is written for
// an operator ("cannot load ./x.so: ...", "stage ABI major mismatch: expected 1, found 2").
class StageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A stage type: its validated descriptor, and for a plugin the library that keeps it mapped.
class StageType {
 public:
  StageType(const hoprelay_stage_descriptor* descriptor, void* dl_handle, std::string origin);
  ~StageType();
  StageType(const StageType&) = delete;
  StageType& operator=(const StageType&) = delete;

  const hoprelay_stage_descriptor& descriptor() const { return *descriptor_; }
  std::string_view name() const { return descriptor_->name; }
  // "built-in" or the path the plugin was loaded from.
  const std::string& origin() const { return origin_; }
  // True when the stage declares its keys and `key` is not among them.
  bool rejects_param(std::string_view key) const;
  std::vector<std::string_view> param_keys() const;
  // HOPRELAY_STAGE_* bits (0 for a stage built against ABI minor 0; bits defined by a later
  // minor than the stage's are cleared).
  uint32_t caps() const;
  // Where its effect is (HOPRELAY_STAGE_TRANSFORM, HOPRELAY_STAGE_LOCAL): what a node standing
  // in for a relay does with the relay's stage (stage_abi.h, docs/stages.md "Effect").
  enum class Effect {
    kTransform,   // on the message it forwards: a stand-in runs it
    kLocal,       // on its own host, the message unchanged: a stand-in does not run it
    kBoth,        // both at once: a stand-in runs it, warning of the local effect
    kUndeclared,  // neither bit (before minor 4): taken as a transform, with that warning
  };
  Effect effect() const;
  // The descriptor's last_error (null before ABI minor 2, or when the stage has none).
  const char* (*last_error() const)(void*);

 private:
  const hoprelay_stage_descriptor* descriptor_;
  void* dl_handle_;
  std::string origin_;
};

// True when `plugin` names a shared object rather than a built-in (contains '/' or ends .so).
bool is_plugin_path(std::string_view plugin);

// "transform", "local", "transform and local", "undeclared", for log lines.
std::string_view effect_name(StageType::Effect effect);

// Resolves a built-in name or loads a plugin by path, checking the descriptor's ABI version
// and size. Throws StageError.
std::shared_ptr<const StageType> resolve(std::string_view plugin);

// Checks a descriptor returned by an entry point; throws StageError naming `origin`.
void check_descriptor(const hoprelay_stage_descriptor* descriptor, std::string_view origin);

std::vector<std::string_view> builtin_names();

// For a built-in stage whose create() has no side effect (no file opened: passthrough, crc32c,
// zstd), why it would refuse `params` ("mode must be ..."), or "" when it takes them; for the
// sinks (which open files) only a missing required parameter (file-sink's path, verify-sink's
// report); always "" for plugins, which are checked when the node starts. Lets `hoprelay
// validate` report a bad value where it is written.
std::string builtin_refusal(const StageType& type, const Params& params);

// One stage instance running on a node. Move-only; destroys the instance (after a final
// flush) when it goes.
class Stage {
 public:
  // Throws StageError when the stage's create() refuses the parameters.
  Stage(std::shared_ptr<const StageType> type, const std::string& node, const Params& params);
  ~Stage();
  Stage(Stage&& other) noexcept;
  Stage& operator=(Stage&& other) noexcept;
  Stage(const Stage&) = delete;
  Stage& operator=(const Stage&) = delete;

  hoprelay_verdict process(hoprelay_msg& msg) {
    return type_->descriptor().process(instance_, &msg);
  }
  void flush();
  // Why the last process() said ERROR or DROP, in the stage's words ("" when it does not say).
  std::string_view last_error() const {
    const char* why = last_error_ ? last_error_(instance_) : nullptr;
    return why ? std::string_view(why) : std::string_view();
  }
  std::string_view name() const { return type_->name(); }
  // Takes large messages chunk by chunk (HOPRELAY_STAGE_CHUNKS); else the node reassembles.
  bool chunkwise() const { return (type_->caps() & HOPRELAY_STAGE_CHUNKS) != 0; }
  uint32_t caps() const { return type_->caps(); }
  const std::shared_ptr<const StageType>& type() const { return type_; }

 private:
  std::shared_ptr<const StageType> type_;
  std::unique_ptr<std::string> log_name_;  // stable address: the stage's log context
  void* instance_ = nullptr;
  const char* (*last_error_)(void*) = nullptr;
};

}  // namespace hoprelay::stages
