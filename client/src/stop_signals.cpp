#include "stop_signals.h"

#include <csignal>

namespace hoprelay::client {
namespace {

volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int signal) {
  g_signal = signal;
}

}  // namespace

int stop_signal() {
  return g_signal;
}

const char* stop_signal_name() {
  return g_signal == SIGINT ? "SIGINT" : g_signal == SIGTERM ? "SIGTERM" : "a signal";
}

StopSignals::StopSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, &sa, &old_int_);
  ::sigaction(SIGTERM, &sa, &old_term_);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGINT, &old_int_, nullptr);
}

}  // namespace hoprelay::client
