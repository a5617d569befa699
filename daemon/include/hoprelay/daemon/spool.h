// A spool: what a node holds on disk for one downstream branch that is slow or down (issue 42,
// docs/guarantees.md). The node appends each message it routes to that branch, makes the
// appends durable (sync) before it lets the message's slot go upstream, and sends from the
// spool, in order, as the branch has credit; what the branch acknowledged is consumed. A
// process killed and started again opens the same directory and goes on where it was.
//
// On disk, DIR holds segments `<first index, 20 digits>.spool`, each a file header and records
// numbered on from its first index, and `consumed` (the index below which every record was
// acknowledged; written by save_position() and at close, not synced: a stale one only sends
// again what the branch had, and the branch drops it as a repeat, dedup.h). Each record carries a
// CRC32C: at open, a record cut short or damaged at the end of the last segment (a crash during an
// append) is cut off; damage anywhere else is an error that names the file, since the records
// behind it were acknowledged upstream and cannot be dropped in silence.
//
// Costs: an append is one pwritev, a read two preads, a consume no system call (a consume that
// empties a segment deletes it), a sync one fdatasync per segment written since the last (and
// of the directory after a new segment); none allocates (a new segment does, once per
// segment_bytes). Setup throws std::runtime_error; the rest returns a Status. One thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <vector>

namespace hoprelay::daemon {

// One spooled message: the frame fields a node forwards (transport::OutFrame) and its bytes.
struct SpoolRecord {
  uint32_t origin = 0;
  uint64_t seq = 0;
  uint16_t flags = 0;
  uint32_t chunk = 0;
  int64_t appended_ns = 0;  // wall clock (CLOCK_REALTIME) at the append: the spool's age
  std::span<const std::byte> payload;
};

class Spool {
 public:
  struct Limits {
    uint64_t max_bytes = 0;  // every segment on disk together; 0: no limit
    uint64_t segment_bytes = uint64_t{64} << 20;
    // Records read and not yet consumed, at most: the branch's window (its credits).
    uint32_t window = 4096;
  };
  enum class Status : uint8_t {
    kOk,
    kFull,     // append: max_bytes would be exceeded
    kWindow,   // read: `window` records are out already
    kEmpty,    // read: nothing more to read
    kIoError,  // error() has the errno (ENOSPC: the disk is full)
  };

  // Opens DIR (creates it and its parents' last component) and recovers what it holds. Throws
  // std::runtime_error naming the file and what to do (a directory that cannot be written, a
  // damaged record before the end, a gap between segments).
  Spool(std::string dir, Limits limits);
  ~Spool();
  Spool(const Spool&) = delete;
  Spool& operator=(const Spool&) = delete;

  // Appends `r` after the last record, not yet durable (sync()). kFull leaves the spool as it
  // was; kIoError too (a partial write is cut back).
  Status append(const SpoolRecord& r);
  // Makes every append so far durable.
  Status sync();
  bool synced() const { return !dir_dirty_ && (segments_.empty() || !segments_.back().dirty); }
  // The same sync, done by another thread (spool_syncer.h), so that the node's loop does not
  // wait for the disk: appends to `files` a dup() of each segment written since the last sync
  // (each wants an fdatasync), and to `dirs` one of the directory when a segment was made or
  // deleted (an fsync), and counts them clean. The caller owns the descriptors (a segment
  // consumed meanwhile is closed here; the copy keeps the file to sync). Should that sync fail,
  // sync_failed() makes them wanted again. kIoError (dup failed): nothing appended or changed.
  Status take_unsynced(std::vector<int>& files, std::vector<int>& dirs);
  void sync_failed(int err);

  // The next record not yet read, in order: its fields, and its payload copied into `buffer`
  // (at least the record's length: kIoError with EMSGSIZE otherwise). `out.payload` points
  // into `buffer`.
  Status read(SpoolRecord& out, std::span<std::byte> buffer);
  // The record read last goes back to be read again (it could not be sent after all).
  void unread_last();
  // The records read and not consumed go back to be read again (the branch's link went down
  // with them in flight).
  void rewind();
  // The oldest `n` records read were acknowledged by the branch: gone from the spool (a segment
  // is deleted once all its records are). n at most read_ahead().
  Status consume(uint64_t n);
  // Writes first() to `consumed` (its owner does, once a second: not per record).
  void save_position() { write_consumed(); }
  // Gives up every record (the branch is gone for good): the segments are deleted. Returns how
  // many records there were.
  uint64_t discard();

  // Record indices: consumed below first(), read below read_index(), appended below end().
  uint64_t first() const { return first_; }
  uint64_t read_index() const { return read_; }
  uint64_t end() const { return end_; }
  uint64_t records() const { return end_ - first_; }
  uint64_t unread() const { return end_ - read_; }
  uint64_t read_ahead() const { return read_ - first_; }
  bool empty() const { return end_ == first_; }
  // Bytes on disk (segment files, consumed records of a segment not yet deleted included).
  uint64_t bytes() const { return bytes_; }
  // appended_ns of the oldest record not consumed; 0 when empty.
  int64_t oldest_ns() const { return empty() ? 0 : oldest_ns_; }
  // errno of the last kIoError.
  int error() const { return error_; }
  const std::string& dir() const { return dir_; }

  // What the open found.
  struct Recovered {
    uint64_t records = 0;  // not consumed
    uint32_t segments = 0;
    uint64_t cut_bytes = 0;  // a torn tail cut off the last segment
  };
  const Recovered& recovered() const { return recovered_; }

  static constexpr size_t kRecordHeader = 40;
  static constexpr size_t kFileHeader = 32;
  // A record longer than this is damage, not a message (no slot is near it).
  static constexpr uint32_t kMaxPayload = uint32_t{1} << 30;

 private:
  struct Segment {
    uint64_t first = 0;  // index of its first record
    uint64_t count = 0;
    uint64_t size = 0;  // bytes, header included
    int fd = -1;
    bool dirty = false;  // written since its last fdatasync (the dirty ones are the last few)
    std::string path;
  };
  // A position: the segment (by its first index) and the offset in it.
  struct Cursor {
    size_t segment = 0;  // in segments_
    uint64_t offset = 0;
  };

  void recover();
  // Scans a segment's records from its header on; true when it ends cleanly. On damage,
  // `good` is where the last good record ends.
  bool scan(Segment& s, uint64_t& good, int64_t& first_ns);
  Status roll();  // a new segment after the last
  Status fail(int err) {
    error_ = err;
    return Status::kIoError;
  }
  void write_consumed();
  // Moves `c` from the end of a segment to the start of the next, where there is one.
  void normalize(Cursor& c) const;
  // Reads the header of the record at `c` (normalized): its length and append time; false at
  // damage or the end.
  bool peek(const Cursor& c, uint32_t& length, int64_t& appended_ns) const;
  // Deletes the segments before the one first_ is in.
  void drop_consumed();
  // Deletes every segment (nothing is left to read).
  void drop_all();

  std::string dir_;
  Limits limits_;
  std::deque<Segment> segments_;
  uint64_t first_ = 0, read_ = 0, end_ = 0;
  Cursor first_at_, read_at_;  // where first_ and read_ are
  uint64_t bytes_ = 0;
  int64_t oldest_ns_ = 0;
  // Lengths of the records read and not consumed, a ring of `window` entries, so that
  // consume() needs no read.
  std::vector<uint32_t> in_flight_;
  bool dir_dirty_ = false;  // a segment was created since the directory's last fsync
  int dir_fd_ = -1;
  int consumed_fd_ = -1;
  int error_ = 0;
  Recovered recovered_;
};

}  // namespace hoprelay::daemon
