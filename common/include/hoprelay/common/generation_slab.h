// Handles to objects that come and go, by a 32-bit id that a late message can still carry safely:
// a slab of slots reused through a free list, each id tagged with its slot's generation, so an
// id of an object that is gone never finds the one that took its slot (lookups return null).
// The id is the slot index in the low 16 bits and the generation in the high 16: at most 65,535
// objects at once, and an id is mistaken for a newer one only after 65,536 reuses of its slot,
// far longer than any message waits in a queue here.
//
// One thread (no lock); add() and remove() may allocate (setup path), find() does not.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <vector>

namespace hoprelay {

template <typename T>
class GenerationSlab {
 public:
  static constexpr uint32_t kMaxSlots = 1u << 16;
  // An id no add() returns: find() and remove() take it for one not in use.
  static constexpr uint32_t kNone = UINT32_MAX;

  // Keeps `object` (not null) under a new id. Throws std::length_error past 65,535 at once.
  uint32_t add(T* object) {
    uint32_t index;
    if (!free_.empty()) {
      index = free_.back();
      free_.pop_back();
    } else {
      // The last index is kept free, so that no generation of it can make kNone.
      if (slots_.size() == kMaxSlots - 1) throw std::length_error("GenerationSlab: 65,535 in use");
      index = static_cast<uint32_t>(slots_.size());
      slots_.push_back(Slot{});
    }
    slots_[index].object = object;
    return static_cast<uint32_t>(slots_[index].generation) << 16 | index;
  }
  // The object under `id`, or null when it was removed (or the id was never given).
  T* find(uint32_t id) const {
    if (id == kNone) return nullptr;
    const uint32_t index = id & (kMaxSlots - 1);
    if (index >= slots_.size()) return nullptr;
    const Slot& s = slots_[index];
    return s.generation == id >> 16 ? s.object : nullptr;
  }
  // Forgets `id`; its slot goes to the next add() under the next generation. False for an id
  // not in use (removed already): nothing changes.
  bool remove(uint32_t id) {
    if (!find(id)) return false;
    Slot& s = slots_[id & (kMaxSlots - 1)];
    s.object = nullptr;
    ++s.generation;
    free_.push_back(id & (kMaxSlots - 1));
    return true;
  }
  // Slots made so far: what is in use at most at once, never the number of add() calls.
  size_t slots() const { return slots_.size(); }

 private:
  struct Slot {
    T* object = nullptr;
    uint16_t generation = 0;
  };
  std::vector<Slot> slots_;
  std::vector<uint32_t> free_;
};

}  // namespace hoprelay
