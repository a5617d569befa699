// `hoprelay send`'s summary: what became of the messages (Outcomes, tallied from each
// message's outcome), the wait of --wait-all for every host to have them, and the --json form.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <string>
#include <tuple>

#include "hoprelay/client.hpp"
#include "spool_wait.h"
#include "streams.h"

namespace hoprelay::client {

// What became of the messages: tallied from each message's outcome (libhoprelay calls back
// from inside its calls, on this thread).
class Outcomes {
 public:
  explicit Outcomes(bool resume) : resume_(resume) {}
  static void on_outcome(void* self, const hoprelay_outcome* o) {
    static_cast<Outcomes*>(self)->add(*o);
  }
  void add(const hoprelay_outcome& o) {
    origin_ = o.origin;
    if (o.status == HOPRELAY_REPEAT) {
      if (repeats_ == 0) first_repeat_ = o.seq;
      last_repeat_ = o.seq;
      ++repeats_;
      return;
    }
    if (o.spooled) ++spooled_[{o.spooled_at, o.spooled_for}];
    if (o.status != HOPRELAY_DROPPED) return;
    ++dropped_;
    // Counted at every place that gave it up for the main reason (behind a fan-out, each
    // branch that dropped it lost it), keyed by the place and its words; drops of another
    // reason are consequences of the main one (incomplete further down).
    bool counted = false;
    for (uint32_t i = 0; i < o.n_drops; ++i) {
      if (o.drop[i].reason != o.reason) continue;
      ++by_place_[{o.drop[i].node, hoprelay_drop_reason_name(o.drop[i].reason), o.drop[i].detail}];
      counted = true;
    }
    if (!counted && o.n_drops > 0) {
      ++by_place_[{o.drop[0].node, hoprelay_drop_reason_name(o.drop[0].reason), o.drop[0].detail}];
    }
    if (o.drops > o.n_drops) ++unnamed_;
    if (o.partial) ++partial_;
  }
  uint64_t dropped() const { return dropped_; }
  uint64_t repeats() const { return repeats_; }
  const Spooled& spooled() const { return spooled_; }
  // The drops by place and reason, for the JSON summary: "[{...}, ...]".
  std::string drops_json() const {
    std::map<std::pair<std::string, std::string>, uint64_t> by;
    for (const auto& [key, n] : by_place_) by[{std::get<0>(key), std::get<1>(key)}] += n;
    std::string out = "[";
    for (const auto& [key, n] : by) {
      out += (out.size() > 1 ? ", " : "") + std::string("{\"at\": \"") + key.first +
             "\", \"reason\": \"" + key.second + "\", \"messages\": " + std::to_string(n) + "}";
    }
    return out + "]";
  }
  // "10 of 10 messages dropped at b: stage_error (crc32c: ...)", one line per place; the
  // repeats; nothing when everything was delivered.
  // `lines`: the spooled lines on standard output (not with --json, whose summary has them).
  void print(uint64_t messages, uint64_t delivered, bool lines = true) const {
    // Delivered, but for a branch that takes them later from a spool (docs/topology.md).
    for (const auto& [key, n] : lines ? spooled_ : Spooled{}) {
      std::printf("%llu delivered, of which %llu still spooled at %s for %s\n",
                  static_cast<unsigned long long>(delivered), static_cast<unsigned long long>(n),
                  key.first.c_str(), key.second.c_str());
    }
    for (const auto& [key, n] : by_place_) {
      const auto& [node, reason, detail] = key;
      std::fprintf(stderr, "hoprelay send: %llu of %llu messages dropped at %s: %s%s%s%s\n",
                   static_cast<unsigned long long>(n), static_cast<unsigned long long>(messages),
                   node.c_str(), reason.c_str(), detail.empty() ? "" : " (", detail.c_str(),
                   detail.empty() ? "" : ")");
    }
    if (unnamed_) {
      std::fprintf(stderr,
                   "hoprelay send: %llu of the dropped messages were also dropped at more places "
                   "than an outcome names (%d): the drop lines in the nodes' logs name them\n",
                   static_cast<unsigned long long>(unnamed_), HOPRELAY_OUTCOME_RECORDS);
    }
    if (partial_) {
      std::fprintf(stderr,
                   "hoprelay send: %llu of the dropped messages were delivered on other "
                   "branches\n",
                   static_cast<unsigned long long>(partial_));
    }
    if (repeats_ && resume_) {
      std::fprintf(stderr,
                   "hoprelay send: origin %u resumed: the head already had sequence numbers "
                   "%llu-%llu; those %llu messages were not sent again\n",
                   origin_, static_cast<unsigned long long>(first_repeat_),
                   static_cast<unsigned long long>(last_repeat_),
                   static_cast<unsigned long long>(repeats_));
    } else if (repeats_) {
      std::fprintf(stderr,
                   "hoprelay send: origin %u: the head already had sequence numbers %llu-%llu; "
                   "%llu messages dropped as repeats (use --first-seq %llu to append new data, "
                   "--resume if this is the input an interrupted send of this origin was "
                   "sending, or another origin)\n",
                   origin_, static_cast<unsigned long long>(first_repeat_),
                   static_cast<unsigned long long>(last_repeat_),
                   static_cast<unsigned long long>(repeats_),
                   static_cast<unsigned long long>(last_repeat_ + 1));
    }
  }

 private:
  bool resume_;  // --resume: repeats are the part an interrupted send got through
  uint32_t origin_ = 0;
  uint64_t dropped_ = 0, partial_ = 0, repeats_ = 0, unnamed_ = 0;
  uint64_t first_repeat_ = 0, last_repeat_ = 0;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> by_place_;
  Spooled spooled_;  // (node, branch)
};

// --wait-all: waits for the spools that hold part of the stream (spool_wait.h) and says which
// hosts do not have everything at the end, on standard error. True when every host has it.
bool wait_all(const SendOptions& o, const Spooled& spooled, SpoolWaitResult& result);

// --json: the summary, one object on one line.
void print_json(uint32_t origin, uint64_t messages, uint64_t bytes, double secs, uint64_t delivered,
                const Outcomes& outcomes, bool waited, const SpoolWaitResult& wait, bool complete,
                int code);

}  // namespace hoprelay::client
