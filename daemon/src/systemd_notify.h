// hoprelayd's side of systemd's notify protocol (sd_notify(3)): READY=1 once the node serves,
// STATUS= lines for `systemctl status`, STOPPING=1 when a drain starts, and WATCHDOG=1 fed
// from the node's event loop. Without NOTIFY_SOCKET (not run by systemd with Type=notify)
// every call is a no-op.
#pragma once

#include <chrono>
#include <string>

#include "hoprelay/transport/event_loop.h"

namespace hoprelay::daemon {

class SystemdNotifier {
 public:
  SystemdNotifier();
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  // True when a service manager listens (NOTIFY_SOCKET is set).
  bool active() const { return active_; }
  // READY=1 with a STATUS= line; only the first call sends READY=1.
  void ready(const std::string& status);
  void status(const std::string& status);
  void stopping(const std::string& status);
  // RELOADING=1: follow with ready() once the reload is done (or refused).
  void reloading();

  // When the manager asked for a watchdog (WATCHDOG_USEC, and WATCHDOG_PID naming this process
  // if set), sends WATCHDOG=1 now and then from a timer in `loop` every half interval, so a
  // loop that stops turning stops feeding it. Returns the manager's interval, 0 when none.
  std::chrono::microseconds start_watchdog(transport::EventLoop& loop);

 private:
  void send(const std::string& message);
  void feed();

  bool active_ = false;
  bool ready_sent_ = false;
  bool reloading_ = false;
  transport::EventLoop* loop_ = nullptr;
  std::chrono::milliseconds feed_every_{0};
};

}  // namespace hoprelay::daemon
