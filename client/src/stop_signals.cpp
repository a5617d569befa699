#include "stop_signals.h"

#include <csignal>
#include <cstdio>

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

int exit_status(int code) {
  const int signal = g_signal;
  if (signal == 0) return code;
  std::fflush(nullptr);
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  ::sigaction(signal, &sa, nullptr);
  ::raise(signal);
  return 128 + signal;  // not reached
}

StopSignals::StopSignals() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sa.sa_flags = SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  ::sigaction(SIGINT, nullptr, &old_int_);
  ::sigaction(SIGTERM, nullptr, &old_term_);
  if (old_int_.sa_handler != SIG_IGN) ::sigaction(SIGINT, &sa, nullptr);
  if (old_term_.sa_handler != SIG_IGN) ::sigaction(SIGTERM, &sa, nullptr);
}

StopSignals::~StopSignals() {
  ::sigaction(SIGTERM, &old_term_, nullptr);
  ::sigaction(SIGINT, &old_int_, nullptr);
}

}  // namespace hoprelay::client
