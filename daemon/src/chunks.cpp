// Chunks of messages larger than a slot (chunks.h says how each goes, and the two rules that
// keep it bounded). node.cpp has the whole-message path every message starts on.
#include <algorithm>
#include <cstring>
#include <utility>

#include "hoprelay/daemon/chunks.h"

#include "node_log.h"

namespace hoprelay::daemon {

using Mode = Partial::Mode;

Chunks::Chunks(const config::NodeSpec& spec, transport::EventLoop& loop, HeldSlots& held,
               Downstreams& downstreams, StageRunner& stage, DedupTable& dedup, Releaser& releaser,
               DropLog& drops, NodeMetrics& metrics)
    : spec_(&spec),
      loop_(loop),
      held_(held),
      downstreams_(downstreams),
      stage_(stage),
      dedup_(dedup),
      releaser_(releaser),
      drops_(drops),
      dropped_duplicate_(metrics.hot().wrap(metrics.dropped("duplicate"))),
      dropped_incomplete_(metrics.hot().wrap(metrics.dropped("incomplete"))),
      dropped_reassembly_full_(metrics.hot().wrap(metrics.dropped("reassembly_full"))) {}

void Chunks::check_assembling_slow(const transport::InboundLink& link,
                                   const transport::Slot& slot) {
  for (const auto& [l, p] : assembling_) {
    if (l != &link) continue;
    if (p->origin != slot.origin || p->seq != slot.seq) {
      abandon(*p, dropped_incomplete_, "incomplete");
    }
    return;
  }
}

void Chunks::stop_assembling(const Partial& p) {
  std::erase_if(assembling_, [&](const auto& a) { return a.second == &p; });
}

void Chunks::close(Partial& p) {
  stop_assembling(p);
  downstreams_.leave(p);
  partials_.close(p);
}

bool Chunks::refuse_compressed(uint16_t flags, const transport::InboundLink* from,
                               transport::Slot& slot, bool branch) {
  if (!receiver_ || !(flags & transport::kFlagZstd)) return false;
  static constexpr std::string_view kLeaf =
      "zstd-compressed: give this leaf a zstd stage with mode = \"decompress\"";
  static constexpr std::string_view kRelay =
      "zstd-compressed: forwarded, but not handed to this relay's application; give it a zstd "
      "stage with mode = \"decompress\" (its peers then get it decompressed)";
  stage_.refuse(branch ? kRelay : kLeaf, slot.origin, slot.seq, from, slot, branch);
  return true;
}

// One chunk: a replayed copy is dropped, the rest goes the way its message's first chunk
// decided.
void Chunks::on_chunk(transport::InboundLink& link, transport::Slot& slot, const StageJob* job) {
  const bool last = !(slot.flags & transport::kFlagMore);
  const bool abort = slot.flags & transport::kFlagAbort;
  Partial* p = partials_.find(slot.origin, slot.seq);
  if (dedup_.seen(slot.origin, slot.seq)) {
    // The whole message passed here already (or fell out of the window): a replay. What
    // this copy started is given up; a link it opened downstream is ended (an abort), or
    // that link would wait for the rest of it forever.
    if (p) {
      if (p->mode == Mode::kAssemble) abandon(*p, dropped_duplicate_, nullptr);
      if (p->mode == Mode::kForward && p->forwarded) send_abort(*p);
      close(*p);
    }
    dropped_duplicate_.add();
    if (held_.hold_with_first(slot)) return;
    return releaser_.release(slot);
  }
  if (!p) {
    // An abort for a message not in passage here ends nothing: its start never came.
    if (abort) return releaser_.release(slot);
    if (partials_.full()) {
      Partial& victim = partials_.oldest();
      if (victim.mode == Mode::kAssemble) abandon(victim, dropped_incomplete_, "incomplete");
      if (victim.mode == Mode::kForward && victim.forwarded) send_abort(victim);
      close(victim);
    }
    p = &partials_.open(slot.origin, slot.seq);
    p->next_chunk = slot.chunk;
    p->link = &link;
    if (stage_.chunkwise() && !receiver_) {  // an application takes whole messages
      p->mode = Mode::kForward;
    } else if (slot.chunk == 0) {
      p->mode = Mode::kAssemble;
    } else {
      // Its first chunks are gone (given up here earlier): it cannot be made whole.
      p->mode = Mode::kDiscard;
      dropped_incomplete_.add();
      drops_.note("incomplete", peer_of(&link), "its first chunks were given up here earlier",
                  slot.origin, slot.seq, loop_.now_ns());
      held_.record_drop(slot, transport::DropReason::kIncomplete,
                        "its first chunks were given up here earlier", false);
    }
  }
  if (slot.chunk < p->next_chunk) {
    dropped_duplicate_.add();  // a chunk this node has taken already, replayed
    if (held_.hold_with_first(slot)) return;
    return releaser_.release(slot);
  }
  if (p->mode == Mode::kAssemble && (slot.chunk > p->next_chunk || &link != p->link)) {
    // Chunks were lost upstream (dropped for a peer down), or this copy comes another way
    // (a node fed by two paths): the copy being reassembled is what counts.
    if (&link != p->link) {
      dropped_duplicate_.add();
      return releaser_.release(slot);
    }
    abandon(*p, dropped_incomplete_, "incomplete");
  }
  p->next_chunk = slot.chunk + 1;
  if (p->mode != Mode::kAssemble) p->link = &link;  // where the rest will come from
  p->orphaned_ns = 0;
  if (abort) {
    // Ended upstream, incomplete: pass the end on, or give up what was held for it. Not
    // recorded as seen: the message was not delivered, and a replay may still bring it.
    if (p->mode == Mode::kForward && p->forwarded && !downstreams_.no_branches(*p)) {
      downstreams_.route(slot, p);
    } else {
      if (p->mode == Mode::kAssemble) abandon(*p, dropped_incomplete_, "incomplete");
      releaser_.release(slot);
    }
    return close(*p);
  }
  // From its last frame on, any copy of the message is a replay.
  if (last) dedup_.first_time(slot.origin, slot.seq);
  if (p->mode == Mode::kForward) {
    forward(*p, slot, job);
  } else if (p->mode == Mode::kAssemble) {
    assemble(*p, slot);
  } else {
    releaser_.release(slot);
  }
  if (last) close(*p);
}

// Cut-through: the chunk passes the stage and goes on now, not once its message is complete.
void Chunks::forward(Partial& p, transport::Slot& slot, const StageJob* job) {
  hoprelay_msg msg{reinterpret_cast<uint8_t*>(slot.payload()),
                   slot.length,
                   spec_->slot_size,
                   slot.origin,
                   static_cast<uint32_t>(slot.flags & ~transport::kFlagAbort),
                   slot.seq,
                   slot.chunk};
  // A leaf or a relay for all of it: decided at its first chunk, as its branches are.
  const bool leaf = downstreams_.no_branches(p);
  hoprelay_verdict verdict;
  if (job) {
    // The stage ran on a worker already (Node::finish_job).
    msg.length = job->length;
    msg.flags = job->flags;
    verdict = stage_.take_verdict(*job, msg.capacity, slot.origin, slot.seq, slot.link, slot);
  } else {
    verdict = stage_.run(msg, slot.link, slot);
  }
  if (verdict != HOPRELAY_FORWARD) {
    // Dropped (counted once: the rest of the message is discarded without the stage). When
    // earlier chunks went downstream already, an abort in this chunk's place ends it there.
    p.mode = Mode::kDiscard;
    if (!p.forwarded || leaf) return releaser_.release(slot);
    slot.length = 0;
    slot.flags = transport::kFlagAbort;
    return downstreams_.route(slot, &p);
  }
  if (leaf) return releaser_.release(slot);
  slot.length = msg.length;
  slot.flags = static_cast<uint16_t>((msg.flags & transport::kStageFlags) |
                                     (slot.flags & transport::kFlagMore));
  p.forwarded = true;
  downstreams_.route(slot, &p);
}

// The stage needs the whole message: hold the chunk in its slot until the last one is here.
void Chunks::assemble(Partial& p, transport::Slot& slot) {
  p.hold(slot, held_);
  transport::InboundLink& link = *slot.link;
  if (p.held == 1) assembling_.emplace_back(&link, &p);  // its first chunk held
  if (!(slot.flags & transport::kFlagMore)) return deliver_assembled(p);
  // Every slot of the link holds this message and it is still not complete: only a sender
  // that ignores the pipeline's largest message (min slots x min slot_size) does that.
  if (p.held >= link.slots()) abandon(p, dropped_reassembly_full_, "reassembly_full");
}

// The last chunk is here: the stage sees the message whole (copied together), and a relay
// sends the result on from the same slots, as chunks again.
void Chunks::deliver_assembled(Partial& p) {
  stop_assembling(p);
  transport::InboundLink* from = p.link;
  if (p.bytes > UINT32_MAX)
    return abandon(p, dropped_incomplete_, "incomplete");  // beyond any message size
  const uint32_t slot_size = spec_->slot_size;
  const size_t room = size_t{p.held} * slot_size;
  if (scratch_.size() < room) scratch_.resize(room);  // grows to the largest message, once
  // A stage that takes chunks is reassembled for only because an application here takes whole
  // messages: it still sees each chunk, in its slot, before they are copied together (a zstd
  // stage decompresses each chunk's own frame).
  const bool chunkwise = stage_.chunkwise();
  bool passed = true;
  for (transport::Slot* s = p.first; chunkwise && passed && s; s = held_.next(*s)) {
    hoprelay_msg chunk{reinterpret_cast<uint8_t*>(s->payload()),
                       s->length,
                       slot_size,
                       s->origin,
                       s->flags,
                       s->seq,
                       s->chunk};
    passed = stage_.run(chunk, from, *s) == HOPRELAY_FORWARD;
    s->length = chunk.length;
    s->flags = static_cast<uint16_t>((chunk.flags & transport::kStageFlags) |
                                     (s->flags & transport::kFlagMore));
  }
  uint16_t flags = 0;
  size_t length = 0;
  for (transport::Slot* s = p.first; passed && s; s = held_.next(*s)) {
    std::memcpy(scratch_.data() + length, s->payload(), s->length);
    length += s->length;
    flags |= s->flags & transport::kStageFlags;
  }
  transport::Slot* list = p.take();
  hoprelay_msg msg{reinterpret_cast<uint8_t*>(scratch_.data()),
                   static_cast<uint32_t>(length),
                   static_cast<uint32_t>(std::min<size_t>(room, UINT32_MAX)),
                   p.origin,
                   flags,
                   p.seq,
                   0};
  if (passed && !chunkwise) passed = stage_.run(msg, from, *list) == HOPRELAY_FORWARD;
  if (passed && downstreams_.leaf() &&
      refuse_compressed(static_cast<uint16_t>(msg.flags), from, *list)) {
    passed = false;
  }
  if (passed && downstreams_.leaf() && receiver_) {
    // Held, unacknowledged, until the application releases the message.
    for (transport::Slot* s = list; s; s = held_.next(*s)) held_.hold(*s).refs = 1;
    receiver_->on_delivered(p.origin, p.seq, {scratch_.data(), msg.length}, *list, true);
    return;
  }
  const bool forwarding = passed && !downstreams_.leaf();
  // A relay that keeps what it relays hands its application the whole message (a copy: the
  // reassembly buffer) and holds the message's first slot for it: credits return in ring
  // order, so no later chunk of it is acknowledged upstream before that one either.
  const bool local = forwarding && receiver_ &&
                     !refuse_compressed(static_cast<uint16_t>(msg.flags), from, *list, true);
  size_t offset = 0;
  uint32_t index = 0;
  for (transport::Slot* s = list; s;) {
    transport::Slot* next = std::exchange(held_.note(*s).next, nullptr);  // route() may release s
    size_t n = std::min<size_t>(slot_size, msg.length - offset);
    if (!forwarding || (n == 0 && index > 0)) {
      releaser_.release(*s);
    } else {
      std::memcpy(s->payload(), scratch_.data() + offset, n);
      offset += n;
      s->length = static_cast<uint32_t>(n);
      s->chunk = index++;
      s->flags = static_cast<uint16_t>((msg.flags & transport::kStageFlags) |
                                       (offset < msg.length ? transport::kFlagMore : 0));
      downstreams_.route(*s, &p, local && s == list ? 1 : 0);
    }
    s = next;
  }
  if (local) receiver_->on_delivered(p.origin, p.seq, {scratch_.data(), msg.length}, *list, true);
}

void Chunks::abandon(Partial& p, HotCounters::Ref& reason, const char* label) {
  reason.add();
  if (label) {
    const bool full = label == std::string_view("reassembly_full");
    std::string_view why =
        full ? "its chunks fill the link's whole ring and it is still not complete"
             : "chunks of it are missing, or its sender gave it up";
    drops_.note(label, peer_of(p.link), why, p.origin, p.seq, loop_.now_ns());
    if (p.first) {
      // On its first chunk's slot, before they go back: the outcome travels with them.
      held_.record_drop(
          *p.first,
          full ? transport::DropReason::kReassemblyFull : transport::DropReason::kIncomplete, why,
          false);
    }
  }
  if (p.mode == Mode::kAssemble) {
    stop_assembling(p);
    release_held(p);
  }
  p.mode = Mode::kDiscard;
}

void Chunks::release_held(Partial& p) {
  for (transport::Slot* s = p.take(); s;) {
    transport::Slot* next = std::exchange(held_.note(*s).next, nullptr);
    releaser_.release(*s);
    s = next;
  }
}

void Chunks::link_down(const transport::InboundLink& link) {
  partials_.for_each([&](Partial& p) {
    if (p.link != &link) return;
    if (p.mode == Mode::kForward && p.forwarded) {
      // Its sender normally comes back and sends the rest (what this node has is dropped
      // as replayed); tick() ends it downstream if it does not.
      p.orphaned_ns = loop_.now_ns();
      return;
    }
    // Held chunks were never acknowledged: the sender sends them all again, and the message
    // starts afresh then (no drop).
    if (p.mode == Mode::kAssemble) release_held(p);
    close(p);
  });
}

void Chunks::tick() {
  const uint64_t now = loop_.now_ns();
  partials_.for_each([&](Partial& p) {
    if (!p.orphaned_ns || now - p.orphaned_ns < kOrphanTimeoutNs) return;
    // Its downstream holds its first chunks (a reassembling node, unacknowledged), and this
    // link waits for its next one: neither can wait for a sender that is gone.
    send_abort(p);
    close(p);
  });
}

void Chunks::send_abort(Partial& p) {
  transport::Slot* s = held_.take_own();
  if (!s || downstreams_.no_branches(p)) {
    if (s) held_.give_back_own(*s);
    // Downstream then learns it from the next frame on the link (a reassembling node gives
    // the message up on it); the link must not wait for the rest of the message any longer.
    downstreams_.forget_open(p.origin, p.seq);
    return;
  }
  s->origin = p.origin;
  s->seq = p.seq;
  s->chunk = p.next_chunk;
  s->flags = transport::kFlagAbort;
  held_.note(*s).arrived_ns = loop_.now_ns();
  downstreams_.route(*s, &p);
}

}  // namespace hoprelay::daemon
