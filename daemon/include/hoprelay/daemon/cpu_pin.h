// Pinning the node's threads to the CPUs of `cpu` (docs/topology.md).
#pragma once

#include <cstdint>
#include <string>

namespace hoprelay::daemon {

// Why `cpu` is not a CPU this process may run on, with what to do ("" when it is). Checked for
// every CPU of the list before anything is pinned, so a wrong list stops the node at start.
std::string cpu_refusal(uint32_t cpu);
// Pins the calling thread to `cpu`; returns why it could not ("" on success).
std::string pin_this_thread(uint32_t cpu);

}  // namespace hoprelay::daemon
