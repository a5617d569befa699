// Dead-peer detection for an RC queue pair that does not rely on the transport retry count.
//
// A reliable-connected QP learns that its peer is gone only when a send exhausts its retries.
// How many retries that is depends on the device: the IB spec's retry_count 7 is seven retries
// on hardware, but Soft-RoCE (rxe_comp.c) takes 7 as "retry forever", so there a send to a
// host that crashed (or whose QP vanished without a disconnect request) never completes and
// the link never fails. Lowering the retry count trades that for spurious link failures when
// ACKs are merely late (it stalled the single-VM Soft-RoCE suite); so the count stays and this
// watch bounds the wait instead: if a signaled send has been waiting for its completion for a
// whole timeout, with no send completing in between, the peer's NIC is not answering (a live
// peer's NIC acknowledges at the transport level however busy its process is) and the link
// fails; its frames are replayed after reconnecting.
//
// Counters only, no clock: the link's periodic timer calls tick() once per interval.
#pragma once

#include <cstdint>

namespace hoprelay::transport::verbs {

class SendWatchdog {
 public:
  // A signaled send was posted / its completion arrived.
  void posted() { ++posted_; }
  void completed() { ++completed_; }
  // Once per tick. True when a signaled send has been outstanding for `limit` ticks in a row
  // without any send completing.
  bool tick(uint32_t limit) {
    if (completed_ == posted_ || completed_ != completed_at_tick_) {
      stalled_ = 0;
    } else {
      ++stalled_;
    }
    completed_at_tick_ = completed_;
    return stalled_ >= limit;
  }
  void reset() { *this = SendWatchdog{}; }

 private:
  uint64_t posted_ = 0;
  uint64_t completed_ = 0;
  uint64_t completed_at_tick_ = 0;
  uint32_t stalled_ = 0;
};

}  // namespace hoprelay::transport::verbs
