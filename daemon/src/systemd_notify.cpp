#include "systemd_notify.h"

#include <systemd/sd-daemon.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "spdlog/spdlog.h"

namespace hoprelay::daemon {
namespace {

// hoprelayd's own logger: these lines belong with start, signals and exit.
spdlog::logger& log() {
  return *spdlog::default_logger_raw();
}

// STATUS= ends at the line break: keep the text on one line.
std::string one_line(std::string s) {
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

SystemdNotifier::SystemdNotifier() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  active_ = socket != nullptr && *socket != '\0';
}

void SystemdNotifier::send(const std::string& message) {
  if (!active_) return;
  // unset_environment = 0: NOTIFY_SOCKET stays for the later calls (NotifyAccess=main makes
  // systemd ignore any child a stage might spawn).
  int r = sd_notify(0, message.c_str());
  if (r < 0) {
    // Once: the manager went away or the socket is unusable; there is no one to tell.
    log().warn("cannot notify the service manager ({}); notifications stop here", strerror(-r));
    active_ = false;
  }
}

void SystemdNotifier::ready(const std::string& status) {
  // Once at start, and again after each RELOADING=1 (systemd waits for it to end the reload).
  if (ready_sent_ && !reloading_) return this->status(status);
  ready_sent_ = true;
  reloading_ = false;
  send("READY=1\nSTATUS=" + one_line(status));
}

void SystemdNotifier::reloading() {
  reloading_ = true;
  send("RELOADING=1\nSTATUS=reloading the topology");
}

void SystemdNotifier::status(const std::string& status) {
  send("STATUS=" + one_line(status));
}

void SystemdNotifier::stopping(const std::string& status) {
  send("STOPPING=1\nSTATUS=" + one_line(status));
}

std::chrono::microseconds SystemdNotifier::start_watchdog(transport::EventLoop& loop) {
  if (!active_) return std::chrono::microseconds(0);
  uint64_t usec = 0;
  // > 0 only when WATCHDOG_USEC is set and WATCHDOG_PID, if set, is this process.
  if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) return std::chrono::microseconds(0);
  loop_ = &loop;
  feed_every_ = std::max(
      std::chrono::milliseconds(1),
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::microseconds(usec / 2)));
  log().info(
      "watchdog: the service manager expects a sign of life every {} ms; sending one every {} ms",
      usec / 1000, feed_every_.count());
  feed();
  return std::chrono::microseconds(usec);
}

void SystemdNotifier::feed() {
  send("WATCHDOG=1");
  if (active_) loop_->after(feed_every_, [this] { feed(); });
}

}  // namespace hoprelay::daemon
