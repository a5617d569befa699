#include "hoprelay/stages/stage.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstring>

#include "builtin.h"
#include "spdlog/spdlog.h"

namespace hoprelay::stages {
namespace {

struct Builtin {
  std::string_view name;
  const hoprelay_stage_descriptor* (*entry)();
  bool pure;  // create() touches nothing outside the instance: validation may try it
  // A parameter create() refuses to go without: checked by validation also where create()
  // cannot be tried (it opens files), with the words create() uses.
  std::string_view required = {};
};

constexpr std::array<Builtin, 5> kBuiltins{{
    {"passthrough", &passthrough_descriptor, true},
    {"crc32c", &crc32c_descriptor, true},
    {"verify-sink", &verify_sink_descriptor, false, "report"},
    {"file-sink", &file_sink_descriptor, false, "path"},
    {"zstd", &zstd_descriptor, true},
}};

// Stage log lines go to the node's "stage" logger, tagged with the stage name.
void stage_log(void* ctx, int level, const char* message) {
  auto* name = static_cast<const std::string*>(ctx);
  static const auto logger = [] {
    auto l = spdlog::get("stage");
    return l ? l : spdlog::default_logger()->clone("stage");
  }();
  auto lvl = level <= HOPRELAY_LOG_DEBUG  ? spdlog::level::debug
             : level == HOPRELAY_LOG_INFO ? spdlog::level::info
             : level == HOPRELAY_LOG_WARN ? spdlog::level::warn
                                          : spdlog::level::err;
  logger->log(lvl, "[{}] {}", *name, message);
}

// The descriptor as ABI minor 0 defined it: everything before `caps`.
constexpr size_t kMinor0DescriptorSize = offsetof(hoprelay_stage_descriptor, caps);

}  // namespace

StageType::StageType(const hoprelay_stage_descriptor* descriptor, void* dl_handle,
                     std::string origin)
    : descriptor_(descriptor), dl_handle_(dl_handle), origin_(std::move(origin)) {}

uint32_t StageType::caps() const {
  bool present = descriptor_->struct_size >= offsetof(hoprelay_stage_descriptor, caps) + 4;
  if (!present) return 0;
  // The thread bits mean something only from minor 3: an older stage that happened to set
  // them (unused bits then) still runs on the event loop alone.
  constexpr uint32_t kThreadBits = HOPRELAY_STAGE_THREADSAFE | HOPRELAY_STAGE_PER_THREAD;
  // So do the effect bits before minor 4: such a stage declares no effect.
  constexpr uint32_t kEffectBits = HOPRELAY_STAGE_TRANSFORM | HOPRELAY_STAGE_LOCAL;
  uint32_t caps = descriptor_->caps;
  if (descriptor_->abi_minor < 3) caps &= ~kThreadBits;
  if (descriptor_->abi_minor < 4) caps &= ~kEffectBits;
  return caps;
}

StageType::Effect StageType::effect() const {
  const uint32_t c = caps();
  const bool transform = (c & HOPRELAY_STAGE_TRANSFORM) != 0;
  const bool local = (c & HOPRELAY_STAGE_LOCAL) != 0;
  if (transform && local) return Effect::kBoth;
  if (transform) return Effect::kTransform;
  if (local) return Effect::kLocal;
  return Effect::kUndeclared;
}

std::string_view effect_name(StageType::Effect effect) {
  switch (effect) {
    case StageType::Effect::kTransform:
      return "transform";
    case StageType::Effect::kLocal:
      return "local";
    case StageType::Effect::kBoth:
      return "transform and local";
    case StageType::Effect::kUndeclared:
      break;
  }
  return "undeclared";
}

StageType::~StageType() {
  if (dl_handle_) dlclose(dl_handle_);
}

bool StageType::rejects_param(std::string_view key) const {
  if (!descriptor_->param_keys) return false;
  for (const char* const* k = descriptor_->param_keys; *k; ++k) {
    if (key == *k) return false;
  }
  return true;
}

std::vector<std::string_view> StageType::param_keys() const {
  std::vector<std::string_view> keys;
  if (descriptor_->param_keys) {
    for (const char* const* k = descriptor_->param_keys; *k; ++k) keys.emplace_back(*k);
  }
  return keys;
}

bool is_plugin_path(std::string_view plugin) {
  return plugin.find('/') != std::string_view::npos || plugin.ends_with(".so");
}

void check_descriptor(const hoprelay_stage_descriptor* d, std::string_view origin) {
  if (!d) throw StageError(fmt::format("{}: entry point returned no descriptor", origin));
  if (d->abi_major != HOPRELAY_STAGE_ABI_MAJOR) {
    throw StageError(fmt::format("{}: stage ABI major mismatch: expected {}, found {}", origin,
                                 HOPRELAY_STAGE_ABI_MAJOR, d->abi_major));
  }
  // Within one major, a descriptor may be longer (newer minor) but never shorter than the
  // fields minor 0 defined; later fields are read only when struct_size covers them.
  if (d->struct_size < kMinor0DescriptorSize) {
    throw StageError(
        fmt::format("{}: stage descriptor too small: expected at least {} bytes, "
                    "found {}",
                    origin, kMinor0DescriptorSize, d->struct_size));
  }
  if (!d->name || !d->create || !d->process || !d->destroy) {
    throw StageError(
        fmt::format("{}: stage descriptor lacks name, create, process or destroy", origin));
  }
}

std::shared_ptr<const StageType> resolve(std::string_view plugin) {
  if (!is_plugin_path(plugin)) {
    for (const auto& b : kBuiltins) {
      if (b.name == plugin) return std::make_shared<StageType>(b.entry(), nullptr, "built-in");
    }
    throw StageError(fmt::format("unknown stage plugin \"{}\"", plugin));
  }
  std::string path(plugin);
  // RTLD_LOCAL keeps each plugin's symbols to itself; RTLD_NOW fails here, at load, on an
  // unresolved symbol rather than in the data loop.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) throw StageError(fmt::format("cannot load stage plugin: {}", dlerror()));
  auto entry =
      reinterpret_cast<hoprelay_stage_entry_fn>(dlsym(handle, HOPRELAY_STAGE_ENTRY_SYMBOL));
  if (!entry) {
    dlclose(handle);
    throw StageError(fmt::format("{}: no symbol {} (is it a hoprelay stage?)", path,
                                 HOPRELAY_STAGE_ENTRY_SYMBOL));
  }
  const hoprelay_stage_descriptor* d = entry();
  try {
    check_descriptor(d, path);
  } catch (...) {
    dlclose(handle);
    throw;
  }
  return std::make_shared<StageType>(d, handle, path);
}

std::vector<std::string_view> builtin_names() {
  std::vector<std::string_view> names;
  for (const auto& b : kBuiltins) names.push_back(b.name);
  return names;
}

std::string builtin_refusal(const StageType& type, const Params& params) {
  for (const auto& b : kBuiltins) {
    if (b.entry() != &type.descriptor()) continue;
    if (!b.required.empty() && std::none_of(params.begin(), params.end(), [&](const auto& p) {
          return p.first == b.required && !p.second.empty();
        })) {
      return fmt::format("stage {} refused its parameters: {} needs a {} parameter", b.name, b.name,
                         b.required);
    }
    if (!b.pure) continue;
    try {
      Stage(std::shared_ptr<const StageType>(&type, [](const StageType*) {}), "validate", params);
    } catch (const StageError& e) {
      return e.what();
    }
  }
  return "";
}

Stage::Stage(std::shared_ptr<const StageType> type, const std::string& node, const Params& params)
    : type_(std::move(type)), log_name_(std::make_unique<std::string>(type_->name())) {
  std::vector<hoprelay_param> c_params;
  c_params.reserve(params.size());
  for (const auto& [k, v] : params) c_params.push_back({k.c_str(), v.c_str()});
  hoprelay_stage_config config{sizeof(hoprelay_stage_config),
                               node.c_str(),
                               c_params.data(),
                               c_params.size(),
                               &stage_log,
                               log_name_.get()};
  std::array<char, 512> err{};
  last_error_ = type_->last_error();
  instance_ = type_->descriptor().create(&config, err.data(), err.size());
  if (!instance_) {
    throw StageError(fmt::format("stage {} refused its parameters: {}", type_->name(),
                                 err[0] ? err.data() : "no reason given"));
  }
}

const char* (*StageType::last_error() const)(void*) {
  bool present = descriptor_->struct_size >=
                 offsetof(hoprelay_stage_descriptor, last_error) + sizeof(descriptor_->last_error);
  return present ? descriptor_->last_error : nullptr;
}

Stage::~Stage() {
  if (instance_) {
    flush();
    type_->descriptor().destroy(instance_);
  }
}

Stage::Stage(Stage&& other) noexcept
    : type_(std::move(other.type_)),
      log_name_(std::move(other.log_name_)),
      instance_(std::exchange(other.instance_, nullptr)),
      last_error_(other.last_error_) {}

Stage& Stage::operator=(Stage&& other) noexcept {
  if (this != &other) {
    Stage dying(std::move(*this));
    type_ = std::move(other.type_);
    log_name_ = std::move(other.log_name_);
    instance_ = std::exchange(other.instance_, nullptr);
    last_error_ = other.last_error_;
  }
  return *this;
}

void Stage::flush() {
  if (instance_ && type_->descriptor().flush) type_->descriptor().flush(instance_);
}

}  // namespace hoprelay::stages
