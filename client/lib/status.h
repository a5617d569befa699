// How libhoprelay reports: a status code returned across the C ABI, and the text of the
// last failure kept per thread for hoprelay_last_error() (errno's and dlerror()'s model: no
// state shared between threads or handles).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

#include "hoprelay/client.h"

namespace hoprelay::client {

// Sets this thread's last error and returns `status`, for `return fail(...)`.
int fail(int status, std::string message);
// The same for a fixed text, copied into the thread's error buffer: once that has grown, no
// allocation. For the datapath's refusals (EAGAIN from recv: a nonblocking application meets
// it at every poll).
int fail(int status, const char* message);
// EAGAIN from a call that would wait: "`what`: would wait", without allocating either.
int would_wait(const char* what);
// Clears it (a call that succeeds leaves the text of an older failure otherwise).
void clear_error();
const char* last_error();

// "1 message", "2 messages": a count with its noun, for the texts above.
inline std::string counted(uint64_t n, const std::string& noun) {
  return std::to_string(n) + " " + noun + (n == 1 ? "" : "s");
}

// Setup failures (open) inside the library: caught at the C boundary and turned into
// fail(status, what()).
class ClientError : public std::runtime_error {
 public:
  ClientError(int status, const std::string& message)
      : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace hoprelay::client
