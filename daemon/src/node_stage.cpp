// The node's side of its stage (the stage itself is StageRunner, stage_runner.h): a message back
// from the workers resumes its walk in arrival order (finish_job), and the upstream series made at
// start.
#include <prometheus/counter.h>
#include <prometheus/gauge.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "hoprelay/daemon/monotonic.h"
#include "hoprelay/daemon/node.h"
#include "node_log.h"

namespace hoprelay::daemon {

void Node::finish_job(StageJob& job) {
  transport::InboundLink& link = *job.link;
  transport::Slot& slot = *job.slot;
  if (!job.staged) {
    take(link, slot, job.repeat);
  } else if (transport::is_chunk(slot.flags, slot.chunk)) {
    take(link, slot, false, &job);  // Chunks takes the worker's verdict
  } else {
    if (Upstreams::of(link)) chunks_->check_assembling(link, slot);
    if (stage_->take_verdict(job, spec_->slot_size, slot.origin, slot.seq, &link, slot) !=
        HOPRELAY_FORWARD) {
      release(slot);
    } else {
      slot.length = job.length;
      after_stage(link, slot, job.flags);
    }
  }
  // This job still counts as pending until the workers' collect() moves past it: checked
  // once it has (the last job of a drain would otherwise leave it to the timeout).
  if (draining_ && held_.count() == 0 && upstreams_->empty())
    loop_.defer([this] { check_drained(); });
}

}  // namespace hoprelay::daemon
