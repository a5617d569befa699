#include "hoprelay/daemon/end_joins.h"

#include <iterator>

#include "hoprelay/config/topology.h"

namespace hoprelay::daemon {
namespace {
constexpr uint32_t kShared = UINT32_MAX;  // a stamp two nodes' names hash to
}

uint32_t EndJoins::stamp_of(std::string_view node) {
  uint64_t h = config::fnv1a64(node);
  auto s = static_cast<uint32_t>(h ^ (h >> 32));
  return s == 0 ? 1 : s;
}

void EndJoins::set_topology(const config::Topology& topology, const std::string& self) {
  std::unordered_map<std::string_view, uint32_t> index;
  index.reserve(topology.nodes.size());
  for (uint32_t i = 0; i < topology.nodes.size(); ++i) index.emplace(topology.nodes[i].name, i);
  edges_.assign(topology.nodes.size(), {});
  by_stamp_.clear();
  upstream_.clear();
  for (uint32_t i = 0; i < topology.nodes.size(); ++i) {
    const config::NodeSpec& n = topology.nodes[i];
    for (const auto& d : n.downstream) {
      if (auto it = index.find(d); it != index.end()) edges_[i].push_back(it->second);
    }
    auto [it, fresh] = by_stamp_.emplace(stamp_of(n.name), i);
    if (!fresh) it->second = kShared;
    if (n.name == self) {
      for (const auto& u : n.upstream) {
        if (auto up = index.find(u); up != index.end()) upstream_.push_back(up->second);
      }
    }
  }
  copies_.clear();
}

uint32_t EndJoins::copies(uint32_t stamp) {
  if (auto it = copies_.find(stamp); it != copies_.end()) return it->second;
  uint32_t n = 0;
  auto head = by_stamp_.find(stamp);
  if (head != by_stamp_.end() && head->second != kShared) {
    // Every node the head reaches (a topology is acyclic, but the walk does not rely on it).
    std::vector<bool> reached(edges_.size());
    std::vector<uint32_t> todo{head->second};
    reached[head->second] = true;
    while (!todo.empty()) {
      uint32_t i = todo.back();
      todo.pop_back();
      for (uint32_t d : edges_[i]) {
        if (!reached[d]) {
          reached[d] = true;
          todo.push_back(d);
        }
      }
    }
    for (uint32_t u : upstream_) n += reached[u] ? 1 : 0;
  }
  copies_.emplace(stamp, n);
  return n;
}

EndJoins::Waiting* EndJoins::waiting(const Key& key) {
  auto it = waiting_index_.find(key);
  return it == waiting_index_.end() ? nullptr : &*it->second;
}

EndJoins::Waiting& EndJoins::wait(const Key& key, uint64_t now_ns) {
  if (Waiting* w = waiting(key)) return *w;
  waiting_.push_back(Waiting{key, {}, now_ns});
  waiting_index_.insert_or_assign(key, std::prev(waiting_.end()));
  return waiting_.back();
}

void EndJoins::stop_waiting(const Key& key) {
  auto it = waiting_index_.find(key);
  if (it == waiting_index_.end()) return;
  waiting_.erase(it->second);
  waiting_index_.erase(it);
}

void EndJoins::done(const Key& key, transport::Slot* passed_on) {
  auto [it, fresh] = done_.insert_or_assign(key, passed_on);
  if (!fresh) return;
  done_order_.push_back(key);
  if (done_order_.size() > kMaxDone) {
    done_.erase(done_order_.front());
    done_order_.pop_front();
  }
}

bool EndJoins::was_done(const Key& key, transport::Slot*& in_flight) const {
  auto it = done_.find(key);
  if (it == done_.end()) return false;
  in_flight = it->second;
  return true;
}

void EndJoins::released(const Key& key, const transport::Slot* slot) {
  if (auto it = done_.find(key); it != done_.end() && it->second == slot) it->second = nullptr;
}

}  // namespace hoprelay::daemon
