// Log lines of a libhoprelay handle go to that handle's callback. The library has no thread of
// its own, so everything it logs happens inside a call on the caller's thread: the call sets
// this thread's route on entry (LogScope) and the sink below follows it. Without a route
// (or with no callback set) a line goes nowhere: the library never prints.
#pragma once

#include "hoprelay/client.h"

namespace hoprelay::client {

struct LogRoute {
  hoprelay_log_fn fn = nullptr;
  void* user = nullptr;
  int level = HOPRELAY_CLIENT_LOG_INFO;
};

// Makes the process's spdlog loggers reach the routes, once. An application (or the hoprelay
// CLI) that configured spdlog's default logger itself keeps it: its lines go where it said.
void install_log_routing();

class LogScope {
 public:
  explicit LogScope(const LogRoute& route);
  ~LogScope();
  LogScope(const LogScope&) = delete;
  LogScope& operator=(const LogScope&) = delete;

 private:
  const LogRoute* previous_;
};

}  // namespace hoprelay::client
