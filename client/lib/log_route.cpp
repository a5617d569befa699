#include "log_route.h"

#include <mutex>
#include <string>

#include "spdlog/sinks/base_sink.h"
#include "spdlog/spdlog.h"
#include "status.h"

namespace hoprelay::client {
namespace {

// initial-exec: a load from the thread pointer instead of a __tls_get_addr call, on every
// datapath call (LogScope). A pointer and a string fit the static TLS that glibc keeps for
// libraries loaded later (dlopen, Python's ctypes).
__attribute__((tls_model("initial-exec"))) thread_local const LogRoute* current = nullptr;
__attribute__((tls_model("initial-exec"))) thread_local std::string error_text;

int level_of(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace:
    case spdlog::level::debug:
      return HOPRELAY_CLIENT_LOG_DEBUG;
    case spdlog::level::info:
      return HOPRELAY_CLIENT_LOG_INFO;
    case spdlog::level::warn:
      return HOPRELAY_CLIENT_LOG_WARN;
    default:
      return HOPRELAY_CLIENT_LOG_ERROR;
  }
}

// spdlog's base sink owns the locking and formatting; this one only picks the callback.
class RouteSink final : public spdlog::sinks::base_sink<std::mutex> {
 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    const LogRoute* route = current;
    if (!route || !route->fn || level_of(msg.level) < route->level) return;
    spdlog::memory_buf_t line;
    formatter_->format(msg, line);
    std::string text(line.data(), line.size());
    while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
    route->fn(route->user, level_of(msg.level), text.c_str());
  }
  void flush_() override {}
};

}  // namespace

int fail(int status, std::string message) {
  error_text = std::move(message);
  return status;
}

int fail(int status, const char* message) {
  error_text.assign(message);  // within its capacity: no allocation
  return status;
}

int would_wait(const char* what) {
  error_text.assign(what);
  error_text.append(": would wait");
  return HOPRELAY_EAGAIN;
}

void clear_error() {
  error_text.clear();
}

const char* last_error() {
  return error_text.c_str();
}

void install_log_routing() {
  static std::once_flag once;
  std::call_once(once, [] {
    // spdlog's own default logger is named "": nobody configured it, so the library may.
    if (spdlog::default_logger() && !spdlog::default_logger()->name().empty()) return;
    auto logger = std::make_shared<spdlog::logger>("hoprelay", std::make_shared<RouteSink>());
    logger->set_pattern("%n: %v");
    logger->set_level(spdlog::level::debug);
    spdlog::set_default_logger(logger);
  });
}

LogScope::LogScope(const LogRoute& route) : previous_(current) {
  current = &route;
}

LogScope::~LogScope() {
  current = previous_;
}

}  // namespace hoprelay::client
