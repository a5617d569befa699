#include "hoprelay/daemon/cpu_pin.h"

#include <pthread.h>
#include <sched.h>

#include <cstring>

namespace hoprelay::daemon {

std::string cpu_refusal(uint32_t cpu) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return "sched_getaffinity failed";
  if (cpu < CPU_SETSIZE && CPU_ISSET(cpu, &allowed)) return "";
  std::string list;
  for (int i = 0; i < CPU_SETSIZE; ++i) {
    if (CPU_ISSET(i, &allowed)) list += (list.empty() ? "" : ",") + std::to_string(i);
  }
  return "cpu = " + std::to_string(cpu) + " but this process may only run on CPUs " + list +
         " (nproc, taskset -p, the unit's CPUAffinity= or the cgroup's cpuset): change `cpu` "
         "in the topology";
}

std::string pin_this_thread(uint32_t cpu) {
  if (std::string why = cpu_refusal(cpu); !why.empty()) return why;
  cpu_set_t one;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  if (int rc = pthread_setaffinity_np(pthread_self(), sizeof(one), &one); rc != 0) {
    return "cannot pin to CPU " + std::to_string(cpu) + ": " + std::strerror(rc);
  }
  return "";
}

}  // namespace hoprelay::daemon
