// One downstream branch's spool (branch_spool.h).
#include "hoprelay/daemon/branch_spool.h"

#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace hoprelay::daemon {

namespace {

// `<spool_dir>/<node>`, made when missing (spool_dir itself too: the operator named it).
std::string node_dir(const config::NodeSpec& spec) {
  for (const std::string& d : {spec.spool_dir, spec.spool_dir + "/" + spec.name}) {
    if (::mkdir(d.c_str(), 0750) != 0 && errno != EEXIST) {
      throw std::runtime_error("cannot create the spool directory " + d + ": " +
                               std::strerror(errno) +
                               " (spool_dir: a directory the node's user may write)");
    }
  }
  return spec.spool_dir + "/" + spec.name;
}

Spool::Limits limits_of(const config::NodeSpec& spec, uint32_t window) {
  Spool::Limits l;
  l.max_bytes = spec.spool_max;
  // Segments of an eighth of the limit (between 1 and 64 MiB): what a consumed segment frees
  // comes back in steps small against the whole.
  l.segment_bytes = std::clamp<uint64_t>(spec.spool_max / 8, uint64_t{1} << 20, uint64_t{64} << 20);
  l.window = window;
  return l;
}

}  // namespace

BranchSpool::BranchSpool(const config::NodeSpec& spec, const std::string& peer, uint32_t window,
                         NodeMetrics& metrics)
    : spool_(node_dir(spec) + "/" + peer, limits_of(spec, window)),
      slot_size_(spec.slot_size),
      window_(window),
      cookies_(window),
      sent_(window),
      series_(metrics.spool(peer)) {
  // What a killed node left in its spool goes out first, before anything routed from now on.
  active_ = !spool_.empty();
}

void BranchSpool::allocate_buffers(transport::Transport& transport) {
  // Not in the constructor: over verbs a region needs the device, which the node opens when
  // it listens, after its components are made.
  if (!buffers_) buffers_ = transport.allocate(size_t{slot_size_} * window_);
}

bool BranchSpool::behind_for_long(bool behind, std::chrono::steady_clock::time_point now,
                                  std::chrono::milliseconds spool_after) {
  if (!behind) {
    behind_ = false;
    return false;
  }
  if (!behind_) {
    behind_ = true;
    behind_since_ = now;
  }
  return now - behind_since_ >= spool_after;
}

Spool::Status BranchSpool::put(const transport::Slot& s, int64_t wall_ns) {
  SpoolRecord r;
  r.origin = s.origin;
  r.seq = s.seq;
  r.flags = s.flags;
  r.chunk = s.chunk;
  r.appended_ns = wall_ns;
  r.payload = {s.payload(), s.length};
  return spool_.append(r);
}

bool BranchSpool::next(transport::OutFrame& f) {
  const uint32_t i = static_cast<uint32_t>(spool_.read_index() % window_);
  std::byte* buffer = buffers_->data() + size_t{i} * slot_size_;
  SpoolRecord r;
  read_status_ = spool_.read(r, {buffer, slot_size_});
  if (read_status_ != Spool::Status::kOk) return false;
  f = transport::OutFrame{};
  f.origin = r.origin;
  f.seq = r.seq;
  f.flags = r.flags;
  f.payload = buffer;
  f.length = static_cast<uint32_t>(r.payload.size());
  f.memory = buffers_.get();
  f.cookie = &cookies_[i];
  f.chunk = r.chunk;
  sent_[i] = {f.length, (f.flags & transport::kFlagEnd) != 0};
  return true;
}

BranchSpool::Acked BranchSpool::acked() {
  if (spool_.read_ahead() == 0) return {0, true};  // discarded meanwhile: not counted
  const Acked a = sent_[spool_.first() % window_];
  spool_.consume(1);
  if (!a.end_mark) series_.replayed->Increment();
  return a;
}

uint64_t BranchSpool::discard() {
  return spool_.discard();
}

void BranchSpool::count_spooled(uint64_t n) {
  series_.spooled->Increment(static_cast<double>(n));
}

int64_t BranchSpool::wall_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
}

void BranchSpool::publish(int64_t wall_ns) {
  spool_.save_position();
  series_.bytes->Set(static_cast<double>(spool_.bytes()));
  series_.messages->Set(static_cast<double>(spool_.records()));
  const int64_t oldest = spool_.oldest_ns();
  series_.age_seconds->Set(oldest == 0 || wall_ns < oldest ? 0.0 : double(wall_ns - oldest) / 1e9);
}

}  // namespace hoprelay::daemon
