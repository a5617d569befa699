// RAII for every verbs and rdma_cm object, and the one place where the three verbs error
// conventions (NULL + errno, a returned errno, -1 + errno) become one: a TransportError on the
// setup path. The data path never throws: it checks return codes and fails the link.
#pragma once

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string>

#include "hoprelay/transport/transport.h"

namespace hoprelay::transport::verbs {

[[noreturn]] inline void throw_errno(int err, const std::string& what) {
  throw TransportError(what + ": " + std::strerror(err));
}

// NULL + errno.
template <class T>
T* check_ptr(T* p, const std::string& what) {
  if (!p) throw_errno(errno ? errno : EIO, what);
  return p;
}

// 0 on success; otherwise -1 + errno (rdma_*) or the errno itself (ibv_*).
inline void check_rc(int rc, const std::string& what) {
  if (rc == 0) return;
  throw_errno(rc == -1 ? errno : rc, what);
}

struct CmChannelDeleter {
  void operator()(rdma_event_channel* c) const { rdma_destroy_event_channel(c); }
};
struct CmIdDeleter {
  void operator()(rdma_cm_id* id) const { rdma_destroy_id(id); }
};
struct PdDeleter {
  void operator()(ibv_pd* pd) const { ibv_dealloc_pd(pd); }
};
struct CompChannelDeleter {
  void operator()(ibv_comp_channel* c) const { ibv_destroy_comp_channel(c); }
};
struct CqDeleter {
  void operator()(ibv_cq* cq) const { ibv_destroy_cq(cq); }
};
struct MrDeleter {
  void operator()(ibv_mr* mr) const { ibv_dereg_mr(mr); }
};
// Owns the QP of a cm id (not the id): rdma_destroy_qp.
struct QpDeleter {
  void operator()(rdma_cm_id* id) const { rdma_destroy_qp(id); }
};

using CmChannel = std::unique_ptr<rdma_event_channel, CmChannelDeleter>;
using CmId = std::unique_ptr<rdma_cm_id, CmIdDeleter>;
using Pd = std::unique_ptr<ibv_pd, PdDeleter>;
using CompChannel = std::unique_ptr<ibv_comp_channel, CompChannelDeleter>;
using Cq = std::unique_ptr<ibv_cq, CqDeleter>;
using Mr = std::unique_ptr<ibv_mr, MrDeleter>;
using QpHandle = std::unique_ptr<rdma_cm_id, QpDeleter>;

// Memory registered with the device once, at link setup (never per message).
class VerbsRegion final : public MemoryRegion {
 public:
  // access: IBV_ACCESS_* flags. Throws TransportError, with the memlock advice when the
  // registration fails for lack of lockable memory.
  VerbsRegion(ibv_pd* pd, size_t bytes, int access);
  ~VerbsRegion() override;
  uint32_t lkey() const override { return mr_->lkey; }
  uint32_t rkey() const { return mr_->rkey; }
  // What it was registered with: a spare ring serves a link that asks for the same.
  ibv_pd* pd() const { return mr_->pd; }
  int access() const { return access_; }

 private:
  Mr mr_;  // deregistered (destructor body) before the memory is freed
  int access_;
};

// What RLIMIT_MEMLOCK allows and what to tell an operator when `needed` bytes do not fit.
// Empty when they fit (or the process may lock without limit).
std::string memlock_shortfall(size_t needed);

}  // namespace hoprelay::transport::verbs
