// Makes the spools' appends durable on a thread of its own (issue 42): an fdatasync takes
// from under a millisecond to a hundred on a busy disk, and on the node's event loop it stopped
// every link of the node for that long, the fast branches' too, which the spool is there to
// keep going. Measured in bench/fleet.sh (SLOW=leaf, 32 hosts, one disk): 8 ms per sync on
// average, the spooling node's loop blocked half the time it spooled.
//
// Group commit: the loop hands over a batch (the descriptors Spool::take_unsynced() gave, for
// every spool with appends since the last), the thread syncs them all, and the loop is woken
// with the result; meanwhile the loop goes on receiving and appending, and what it appends
// waits for the next batch. One batch at a time, so a slower disk makes the batches larger,
// not the queue longer. The slots of what a batch covers go back upstream only once it
// succeeded (Downstreams::synced), as with the synchronous sync: nothing is acknowledged that
// is not on disk.
//
// Owns its thread and the descriptors of the batch in flight. Setup throws std::system_error
// (no thread) or TransportError (no eventfd); the rest is called on the loop's thread, and
// nothing on it allocates once the batch vectors have grown to the number of spools.
#pragma once

#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "hoprelay/transport/event_loop.h"
#include "hoprelay/transport/eventfd_wakeup.h"

namespace hoprelay::daemon {

class SpoolSyncer {
 public:
  // `done` runs on the loop's thread once a batch is synced: 0, or the errno of the first sync
  // that failed (the batch's other descriptors were still synced).
  using Done = std::function<void(int error)>;

  SpoolSyncer(transport::EventLoop& loop, Done done);
  ~SpoolSyncer();  // waits for the batch in flight (its sync cannot be interrupted), joins
  SpoolSyncer(const SpoolSyncer&) = delete;
  SpoolSyncer& operator=(const SpoolSyncer&) = delete;

  // A batch is in flight: the next one waits for its `done`.
  bool busy() const { return busy_; }
  // The batch being put together, while !busy(): descriptors to fdatasync (files) and to
  // fsync (directories), owned by the syncer from here (it closes them).
  std::vector<int>& files() { return files_; }
  std::vector<int>& dirs() { return dirs_; }
  // Hands the batch to the thread (nothing to do when it is empty: false).
  bool start();

 private:
  void run();
  void finished();  // on the loop, woken by the thread

  Done done_;
  std::unique_ptr<transport::EventFdWakeup> wakeup_;
  bool busy_ = false;  // the loop's view
  std::vector<int> files_;
  std::vector<int> dirs_;

  std::mutex mutex_;
  std::condition_variable work_;
  bool given_ = false;  // mutex_: a batch for the thread
  bool stop_ = false;   // mutex_
  int error_ = 0;       // mutex_: the last batch's result
  std::thread thread_;  // last: started once the rest is ready
};

}  // namespace hoprelay::daemon
