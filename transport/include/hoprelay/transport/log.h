// One named logger per module ("tcp", "verbs", "node", ...), all sharing the default logger's
// sinks and format, so the daemon configures output (stderr/journald, text/json) in one place.
#pragma once

#include <memory>
#include <string>

#include "spdlog/spdlog.h"

namespace hoprelay {

inline std::shared_ptr<spdlog::logger> module_logger(const std::string& name) {
  if (auto existing = spdlog::get(name)) return existing;
  auto logger = spdlog::default_logger()->clone(name);
  spdlog::register_logger(logger);
  return logger;
}

}  // namespace hoprelay
