// Ctrl-C (SIGINT) and SIGTERM for `hoprelay send` and `hoprelay recv`: the command stops where
// it is, keeps what it has (send: no end-of-stream mark; recv: what it received is written and
// released) and says how far it got, instead of dying silently (docs/operations.md). The
// handler only records the signal: the commands wait in steps of kStopStepMs and look at
// stop_signal() between steps, whichever thread the kernel interrupted (libhoprelay's own
// waits go on through EINTR, as docs/client.md tells bindings to expect).
#pragma once

#include <signal.h>

namespace hoprelay::client {

constexpr int kStopStepMs = 100;

// The signal that came (SIGINT or SIGTERM), or 0.
int stop_signal();
// "SIGINT" or "SIGTERM".
const char* stop_signal_name();

// Catches SIGINT and SIGTERM while it lives. SA_RESETHAND: a second one ends the command at
// once, for one that does not stop soon enough.
class StopSignals {
 public:
  StopSignals();
  ~StopSignals();
  StopSignals(const StopSignals&) = delete;
  StopSignals& operator=(const StopSignals&) = delete;

 private:
  struct sigaction old_int_ {};
  struct sigaction old_term_ {};
};

}  // namespace hoprelay::client
