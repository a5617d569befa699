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

// The command's exit status when no stop signal came. When one did, the process dies of it
// (its default action), after what was printed is flushed: a shell script that ran the command
// stops too, where an exit with a status would tell bash that the command handled the signal
// and the script goes on.
int exit_status(int code);

// Catches SIGINT and SIGTERM while it lives, unless it was started with them ignored (a
// background job of a script keeps ignoring them). SA_RESETHAND: a second one ends the
// command at once, for one that does not stop soon enough.
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
