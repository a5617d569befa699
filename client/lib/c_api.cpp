// The C ABI of libhoprelay (hoprelay/client.h): argument and version checks, exceptions of the
// setup path turned into status codes, and each call's log lines routed to its handle.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstring>
#include <string>
#include <system_error>

#include "consumer.h"
#include "hoprelay/client.h"
#include "hoprelay/config/topology.h"
#include "log_route.h"
#include "producer.h"
#include "status.h"

using hoprelay::client::ClientError;
using hoprelay::client::fail;
using hoprelay::client::LogRoute;
using hoprelay::client::LogScope;

// A handle is a shell around its implementation: close() frees the implementation and keeps
// the shell, so that a call on a closed handle is told so (ESTATE) rather than reading freed
// memory, and a second close is a no-op; destroy() frees the shell (client.h).
struct hoprelay_producer {
  LogRoute route;
  std::unique_ptr<hoprelay::client::Producer> impl;
  // The call in progress (its name), or null: a handle takes one call at a time, and a call
  // from a second thread meanwhile is refused (InCall) instead of corrupting it.
  std::atomic<const char*> busy{nullptr};
  static constexpr const char* kWhat = "producer";
};

struct hoprelay_consumer {
  LogRoute route;
  std::unique_ptr<hoprelay::client::Consumer> impl;
  std::atomic<const char*> busy{nullptr};
  static constexpr const char* kWhat = "consumer";
};

namespace {

using hoprelay::config::PluginCheck;
using hoprelay::config::Topology;

// The structs the library fills as 1.0 declared them: what the calls without a size fill
// (programs built against a header before 1.9), and the least a size may say.
constexpr size_t kProducerStats10 = offsetof(struct hoprelay_producer_stats, bytes_sent);
constexpr size_t kMessage10 = sizeof(hoprelay_message);
static_assert(kProducerStats10 == 4 * sizeof(uint64_t));
static_assert(kMessage10 == 40 || sizeof(void*) != 8);

// A path, or the TOML text itself when it contains a newline. Throws ClientError.
std::shared_ptr<const Topology> load(const char* topology, const PluginCheck& plugins) {
  try {
    if (std::strchr(topology, '\n')) {
      return std::make_shared<const Topology>(
          hoprelay::config::parse_topology(topology, "<topology text>", plugins));
    }
    return std::make_shared<const Topology>(hoprelay::config::load_topology(topology, plugins));
  } catch (const hoprelay::config::ConfigError& e) {
    std::string all;
    for (const auto& d : e.diagnostics()) all += (all.empty() ? "" : "\n") + d.format();
    throw ClientError(HOPRELAY_ECONFIG, all);
  } catch (const std::system_error& e) {
    throw ClientError(HOPRELAY_ECONFIG,
                      std::string("cannot read ") + topology + ": " + e.code().message());
  }
}

// The options' tls_cert, tls_key and tls_ca (all or none), as the topology gives paths: a
// relative one is the caller's (from its working directory).
hoprelay::config::TlsSpec tls_option(const char* what, const char* cert, const char* key,
                                     const char* ca) {
  hoprelay::config::TlsSpec spec;
  const int given = (cert && *cert) + (key && *key) + (ca && *ca);
  if (given == 0) return spec;
  if (given != 3) {
    throw ClientError(HOPRELAY_EINVAL, std::string(what) +
                                           ": give tls_cert, tls_key and tls_ca together (the "
                                           "certificate, its private key and the peers' CA)");
  }
  spec.cert = cert;
  spec.key = key;
  spec.ca = ca;
  return spec;
}

const hoprelay::config::NodeSpec& find_node(const Topology& t, const char* name) {
  const auto* spec = t.find(name);
  if (!spec) {
    throw ClientError(HOPRELAY_ENODE, std::string("no node \"") + name + "\" in topology " +
                                          t.name + " (nodes: " + t.names() + ")");
  }
  return *spec;
}

// Options from a caller's header: `init` names the call that fills them in (the usual
// mistake: a struct zeroed or built by hand), and a refusal names both versions.
int check_version(uint32_t size, uint16_t major, uint16_t minor, size_t ours, const char* init) {
  const std::string theirs = std::to_string(major) + "." + std::to_string(minor);
  const std::string mine = std::to_string(HOPRELAY_CLIENT_VERSION_MAJOR) + "." +
                           std::to_string(HOPRELAY_CLIENT_VERSION_MINOR);
  if (size == 0) {
    return fail(HOPRELAY_EVERSION, std::string("options with struct_size 0: fill them in with ") +
                                       init + "() before setting fields (it sets the version)");
  }
  if (major != HOPRELAY_CLIENT_VERSION_MAJOR) {
    return fail(HOPRELAY_EVERSION, "built against hoprelay/client.h " + theirs +
                                       "; this libhoprelay is " + mine +
                                       ", another major version: rebuild the application "
                                       "against this library's header (or, if it was, fill "
                                       "the options in with " +
                                       init + "())");
  }
  if (size > ours) {
    return fail(HOPRELAY_EVERSION,
                "built against hoprelay/client.h " + theirs + " (options of " +
                    std::to_string(size) + " bytes); this libhoprelay is " + mine +
                    " (options of up to " + std::to_string(ours) + " bytes): install libhoprelay " +
                    theirs + " or newer, or rebuild the application against this library's header");
  }
  return HOPRELAY_OK;
}

LogRoute route_of(hoprelay_log_fn fn, void* user, int level) {
  return {fn, user, level};
}

// The handle taken by one call: a call from another thread while it runs is refused, naming
// both. One compare-and-swap and one store per call, no lock (the datapath takes none).
template <class H>
class InCall {
 public:
  InCall(H& h, const char* what) : h_(h) {
    const char* none = nullptr;
    if (h.busy.compare_exchange_strong(none, what, std::memory_order_acquire)) {
      taken_ = true;
    } else {
      fail(HOPRELAY_ESTATE, std::string(what) + ": called while " + none + " runs on this " +
                                H::kWhat +
                                " in another thread: a handle takes one call at a time "
                                "(client.h, Threads): give each thread its own handle, or take "
                                "turns with a lock of the application's");
    }
  }
  ~InCall() {
    if (taken_) h_.busy.store(nullptr, std::memory_order_release);
  }
  InCall(const InCall&) = delete;
  InCall& operator=(const InCall&) = delete;
  bool taken() const { return taken_; }

 private:
  H& h_;
  bool taken_ = false;
};

template <class H>
int closed(const char* what) {
  return fail(HOPRELAY_ESTATE, std::string(what) + ": this " + H::kWhat +
                                   " is closed: open a new one (hoprelay_" + H::kWhat +
                                   "_destroy frees the handle)");
}

// Runs a datapath call with the handle's log route; nothing there throws but a bug or the
// system (std::bad_alloc, epoll failing): those become EINTERNAL, never a crash of the app.
template <class H, class Fn>
int call(H* h, const char* what, Fn fn) {
  if (!h) return fail(HOPRELAY_EINVAL, std::string(what) + ": a null handle");
  InCall<H> in(*h, what);
  if (!in.taken()) return HOPRELAY_ESTATE;
  if (!h->impl) return closed<H>(what);
  LogScope scope(h->route);
  try {
    return fn(*h->impl);
  } catch (const std::exception& e) {
    return fail(HOPRELAY_EINTERNAL, e.what());
  } catch (...) {  // nothing may cross the C ABI
    return fail(HOPRELAY_EINTERNAL, "an unknown exception");
  }
}

// A call into a producer from its own on_outcome callback (client.h: it must not), which
// would change the producer under the call the callback runs in: refused.
bool in_own_outcome(const hoprelay_producer* p, const char* what) {
  if (!p || !p->impl || !p->impl->in_outcome()) return false;
  fail(HOPRELAY_ESTATE,
       std::string(what) +
           ": called from this producer's own on_outcome callback, inside one of its calls: "
           "the callback must not call into its producer (note what it needs, and act after "
           "the call returns)");
  return true;
}

// Flags of send and commit other than HOPRELAY_SEND_MORE (a newer header's, or a mistake):
// refused, nothing sent (a reserved buffer stays reserved), rather than ignored.
int unknown_flags(const char* what, int flags) {
  char hex[16];
  std::snprintf(hex, sizeof hex, "0x%x", static_cast<unsigned>(flags & ~HOPRELAY_SEND_MORE));
  return fail(HOPRELAY_EINVAL, std::string(what) + ": unknown flags " + hex +
                                   " (HOPRELAY_SEND_MORE, 0x1, is the only one); nothing sent");
}

// call() for a producer: refused from its own on_outcome callback.
template <class Fn>
int call_producer(hoprelay_producer* p, const char* what, Fn fn) {
  if (in_own_outcome(p, what)) return HOPRELAY_ESTATE;
  return call(p, what, fn);
}

}  // namespace

extern "C" {

const char* hoprelay_strerror(int status) {
  switch (status) {
    case HOPRELAY_OK:
      return "HOPRELAY_OK: success";
    case HOPRELAY_EINVAL:
      return "HOPRELAY_EINVAL: invalid argument";
    case HOPRELAY_ECONFIG:
      return "HOPRELAY_ECONFIG: the topology does not load or validate";
    case HOPRELAY_ENODE:
      return "HOPRELAY_ENODE: no such node, or not a node of that kind";
    case HOPRELAY_ETOOBIG:
      return "HOPRELAY_ETOOBIG: message too large";
    case HOPRELAY_ETIMEDOUT:
      return "HOPRELAY_ETIMEDOUT: timed out";
    case HOPRELAY_EAGAIN:
      return "HOPRELAY_EAGAIN: would wait";
    case HOPRELAY_EREFUSED:
      return "HOPRELAY_EREFUSED: refused by the node";
    case HOPRELAY_EVERSION:
      return "HOPRELAY_EVERSION: incompatible client.h version";
    case HOPRELAY_ESTATE:
      return "HOPRELAY_ESTATE: not valid in this state";
    case HOPRELAY_EUNAVAILABLE:
      return "HOPRELAY_EUNAVAILABLE: cannot start, or the RDMA device went away";
    case HOPRELAY_EINTERNAL:
      return "HOPRELAY_EINTERNAL: internal or system failure";
    case HOPRELAY_EORIGIN:
      return "HOPRELAY_EORIGIN: a producer of this origin is connected already";
    default:
      return "unknown hoprelay status";
  }
}

const char* hoprelay_last_error(void) {
  return hoprelay::client::last_error();
}

uint32_t hoprelay_version(void) {
  return uint32_t{HOPRELAY_CLIENT_VERSION_MAJOR} << 16 | HOPRELAY_CLIENT_VERSION_MINOR;
}

int hoprelay_producer_open(const char* topology, const char* head,
                           const struct hoprelay_producer_options* options,
                           hoprelay_producer** out) {
  if (!out) return fail(HOPRELAY_EINVAL, "producer_open: out is null");
  *out = nullptr;
  if (!topology || !head) return fail(HOPRELAY_EINVAL, "producer_open: topology or head is null");
  hoprelay_producer_options defaults;
  hoprelay_producer_options_init(&defaults);
  if (options) {
    if (int rc = check_version(options->struct_size, options->version_major, options->version_minor,
                               sizeof defaults, "hoprelay_producer_options_init")) {
      return rc;
    }
    std::memcpy(&defaults, options, options->struct_size);
  }
  if (defaults.connect_timeout_ms < 0) {
    return fail(HOPRELAY_EINVAL, "producer_open: connect_timeout_ms must be 0 or more");
  }
  hoprelay::client::clear_error();
  std::unique_ptr<hoprelay_producer> h;
  try {
    hoprelay::client::install_log_routing();
    h = std::make_unique<hoprelay_producer>();
    h->route = route_of(defaults.log, defaults.log_user, defaults.log_level);
  } catch (...) {  // nothing may cross the C ABI
    return fail(HOPRELAY_EINTERNAL, "producer_open: out of memory");
  }
  LogScope scope(h->route);
  try {
    // A head run here runs its stage: checked as the consumer's leaf is.
    auto t = load(topology, defaults.run_head ? PluginCheck{PluginCheck::Mode::kNode, head}
                                              : PluginCheck{PluginCheck::Mode::kNone, ""});
    const auto& spec = find_node(*t, head);
    if (!spec.is_head()) {
      throw ClientError(HOPRELAY_ENODE, "node \"" + spec.name +
                                            "\" has upstream peers: producers send to a head "
                                            "node of topology " +
                                            t->name + " (" +
                                            t->names(&hoprelay::config::NodeSpec::is_head) + ")");
    }
    hoprelay::client::ProducerOptions o{defaults.origin,
                                        defaults.first_seq,
                                        std::chrono::milliseconds(defaults.connect_timeout_ms),
                                        defaults.on_outcome,
                                        defaults.outcome_user,
                                        defaults.run_head != 0};
    o.tls = tls_option("producer_open", defaults.tls_cert, defaults.tls_key, defaults.tls_ca);
    h->impl = std::make_unique<hoprelay::client::Producer>(t, head, o);
  } catch (const ClientError& e) {
    return fail(e.status(), e.what());
  } catch (const std::exception& e) {
    return fail(HOPRELAY_EUNAVAILABLE, e.what());
  } catch (...) {  // nothing may cross the C ABI
    return fail(HOPRELAY_EINTERNAL, "an unknown exception");
  }
  *out = h.release();
  return HOPRELAY_OK;
}

int hoprelay_producer_send(hoprelay_producer* p, const void* data, size_t length, int flags,
                           uint64_t* seq, int timeout_ms) {
  if (flags & ~HOPRELAY_SEND_MORE) return unknown_flags("send", flags);
  if (!data && length) return fail(HOPRELAY_EINVAL, "send: data is null");
  return call_producer(p, "send", [&](auto& impl) {
    return impl.send({static_cast<const std::byte*>(data), length}, flags, seq, timeout_ms);
  });
}

int hoprelay_producer_reserve(hoprelay_producer* p, size_t length, void** buffer, int timeout_ms) {
  if (!buffer) return fail(HOPRELAY_EINVAL, "reserve: buffer is null");
  return call_producer(p, "reserve",
                       [&](auto& impl) { return impl.reserve(length, buffer, timeout_ms); });
}

int hoprelay_producer_commit(hoprelay_producer* p, size_t length, int flags, uint64_t* seq) {
  if (flags & ~HOPRELAY_SEND_MORE) return unknown_flags("commit", flags);
  return call_producer(p, "commit", [&](auto& impl) { return impl.commit(length, flags, seq); });
}

int hoprelay_producer_flush(hoprelay_producer* p, int timeout_ms) {
  return call_producer(p, "flush", [&](auto& impl) { return impl.flush(timeout_ms); });
}

int hoprelay_producer_wait_connected(hoprelay_producer* p, int timeout_ms) {
  return call_producer(p, "wait_connected",
                       [&](auto& impl) { return impl.wait_connected(timeout_ms); });
}

int hoprelay_producer_fd(const hoprelay_producer* p) {
  if (!p) return fail(HOPRELAY_EINVAL, "fd: a null handle");
  if (!p->impl) return closed<hoprelay_producer>("fd");
  return p->impl->fd();
}

int hoprelay_producer_process(hoprelay_producer* p) {
  return call_producer(p, "process", [&](auto& impl) { return impl.process(); });
}

size_t hoprelay_producer_max_message(const hoprelay_producer* p) {
  return p && p->impl ? p->impl->max_message() : 0;
}

size_t hoprelay_producer_max_reserve(const hoprelay_producer* p) {
  return p && p->impl ? p->impl->max_reserve() : 0;
}

uint32_t hoprelay_producer_origin(const hoprelay_producer* p) {
  return p && p->impl ? p->impl->origin() : 0;
}

uint64_t hoprelay_producer_next_seq(const hoprelay_producer* p) {
  return p && p->impl ? p->impl->next_seq() : 0;
}

void hoprelay_producer_stats_sized(const hoprelay_producer* p, struct hoprelay_producer_stats* out,
                                   size_t size) {
  if (!out) return;
  struct hoprelay_producer_stats s {};
  if (p && p->impl) {
    s.sent = p->impl->sent();
    s.acknowledged = p->impl->acknowledged();
    s.bytes_acknowledged = p->impl->bytes_acknowledged();
    s.reconnects = p->impl->reconnects();
    s.bytes_sent = p->impl->bytes_sent();
    s.failovers = p->impl->failovers();
  }
  // An older header's struct is a prefix of ours; a newer one's has more: zeroed.
  std::memcpy(out, &s, std::min(size, sizeof s));
  if (size > sizeof s) std::memset(reinterpret_cast<char*>(out) + sizeof s, 0, size - sizeof s);
}

// (The name in parentheses: client.h's macro of the same name passes the struct's size.)
void(hoprelay_producer_stats)(const hoprelay_producer* p, struct hoprelay_producer_stats* out) {
  hoprelay_producer_stats_sized(p, out, kProducerStats10);
}

uint64_t hoprelay_producer_resume_seq(const hoprelay_producer* p) {
  return p && p->impl ? p->impl->resume_seq() : 0;
}

void hoprelay_producer_outcomes(const hoprelay_producer* p, struct hoprelay_outcome_counts* out,
                                size_t size) {
  if (!out) return;
  hoprelay_outcome_counts counts{};
  if (p && p->impl) counts = p->impl->outcomes();
  std::memcpy(out, &counts, std::min(size, sizeof counts));  // an older, smaller struct too
}

const char* hoprelay_drop_reason_name(int reason) {
  if (reason < 1 || reason > hoprelay::transport::kDropReasonMax) return "unknown";
  return hoprelay::transport::drop_reason_label(hoprelay::transport::DropReason(reason)).data();
}

int hoprelay_producer_end(hoprelay_producer* p, int timeout_ms) {
  return call_producer(p, "end", [&](auto& impl) { return impl.end(timeout_ms); });
}

int hoprelay_producer_close(hoprelay_producer* p, int timeout_ms) {
  if (!p) return fail(HOPRELAY_EINVAL, "close: a null handle");
  if (in_own_outcome(p, "close")) return HOPRELAY_ESTATE;  // freed, it would crash on return
  InCall<hoprelay_producer> in(*p, "close");
  if (!in.taken()) return HOPRELAY_ESTATE;
  if (!p->impl) return HOPRELAY_OK;  // closed already: nothing to do
  LogScope scope(p->route);
  int rc = HOPRELAY_OK;
  try {
    rc = p->impl->close(timeout_ms);
  } catch (const std::exception& e) {
    rc = fail(HOPRELAY_EINTERNAL, e.what());
  } catch (...) {  // nothing may cross the C ABI
    rc = fail(HOPRELAY_EINTERNAL, "an unknown exception");
  }
  p->impl.reset();  // whatever close returned: the shell stays until destroy
  return rc;
}

void hoprelay_producer_destroy(hoprelay_producer* p) {
  if (!p || in_own_outcome(p, "destroy")) return;
  {
    InCall<hoprelay_producer> in(*p, "destroy");
    if (!in.taken()) return;  // freed under the other thread's call, it would crash there
    LogScope scope(p->route);
    p->impl.reset();
  }
  delete p;
}

int hoprelay_consumer_open(const char* topology, const char* node,
                           const struct hoprelay_consumer_options* options,
                           hoprelay_consumer** out) {
  if (!out) return fail(HOPRELAY_EINVAL, "consumer_open: out is null");
  *out = nullptr;
  if (!topology || !node) return fail(HOPRELAY_EINVAL, "consumer_open: topology or node is null");
  hoprelay_consumer_options defaults;
  hoprelay_consumer_options_init(&defaults);
  if (options) {
    if (int rc = check_version(options->struct_size, options->version_major, options->version_minor,
                               sizeof defaults, "hoprelay_consumer_options_init")) {
      return rc;
    }
    std::memcpy(&defaults, options, options->struct_size);
  }
  hoprelay::client::clear_error();
  std::unique_ptr<hoprelay_consumer> h;
  try {
    hoprelay::client::install_log_routing();
    h = std::make_unique<hoprelay_consumer>();
    h->route = route_of(defaults.log, defaults.log_user, defaults.log_level);
  } catch (...) {  // nothing may cross the C ABI
    return fail(HOPRELAY_EINTERNAL, "consumer_open: out of memory");
  }
  LogScope scope(h->route);
  try {
    auto t = load(topology, {PluginCheck::Mode::kNode, node});
    (void)find_node(*t, node);  // (a relay too, since 1.6: it keeps what it relays)
    auto tls = tls_option("consumer_open", defaults.tls_cert, defaults.tls_key, defaults.tls_ca);
    if (tls.enabled()) {  // in place of the node's own, in a copy of the topology
      auto copy = std::make_shared<Topology>(*t);
      for (auto& n : copy->nodes) {
        if (n.name == node) n.tls = tls;
      }
      t = std::move(copy);
    }
    h->impl = std::make_unique<hoprelay::client::Consumer>(
        t, node, defaults.state_dir ? defaults.state_dir : "");
  } catch (const ClientError& e) {
    return fail(e.status(), e.what());
  } catch (const std::exception& e) {
    return fail(HOPRELAY_EUNAVAILABLE, e.what());
  } catch (...) {  // nothing may cross the C ABI
    return fail(HOPRELAY_EINTERNAL, "an unknown exception");
  }
  *out = h.release();
  return HOPRELAY_OK;
}

int hoprelay_consumer_recv_sized(hoprelay_consumer* c, struct hoprelay_message* msg, size_t size,
                                 int timeout_ms) {
  if (!msg) return fail(HOPRELAY_EINVAL, "recv: msg is null");
  if (size < kMessage10) {
    return fail(HOPRELAY_EINVAL, "recv: a struct hoprelay_message of " + std::to_string(size) +
                                     " bytes; it has at least " + std::to_string(kMessage10) +
                                     ": pass sizeof(struct hoprelay_message)");
  }
  // Every field the library fills today is in 1.0's message; a later one goes here, written
  // only when `size` holds it.
  return call(c, "recv", [&](auto& impl) { return impl.recv(*msg, timeout_ms); });
}

// (The name in parentheses: client.h's macro of the same name passes the struct's size.)
int(hoprelay_consumer_recv)(hoprelay_consumer* c, struct hoprelay_message* msg, int timeout_ms) {
  return hoprelay_consumer_recv_sized(c, msg, kMessage10, timeout_ms);
}

int hoprelay_consumer_release(hoprelay_consumer* c, struct hoprelay_message* msg) {
  if (!msg) return fail(HOPRELAY_EINVAL, "release: msg is null");
  return call(c, "release", [&](auto& impl) { return impl.release(*msg, std::nullopt); });
}

int hoprelay_consumer_release_at(hoprelay_consumer* c, struct hoprelay_message* msg,
                                 uint64_t app_position) {
  if (!msg) return fail(HOPRELAY_EINVAL, "release: msg is null");
  return call(c, "release_at", [&](auto& impl) { return impl.release(*msg, app_position); });
}

int hoprelay_consumer_abandon(hoprelay_consumer* c, struct hoprelay_message* msg) {
  if (!msg) return fail(HOPRELAY_EINVAL, "abandon: msg is null");
  return call(c, "abandon", [&](auto& impl) { return impl.abandon(*msg); });
}

uint64_t hoprelay_consumer_app_position(const hoprelay_consumer* c) {
  return c && c->impl ? c->impl->app_position() : 0;
}

uint64_t hoprelay_consumer_resume_seq(const hoprelay_consumer* c, uint32_t origin) {
  return c && c->impl ? c->impl->resume_seq(origin) : 0;
}

int hoprelay_consumer_fd(const hoprelay_consumer* c) {
  if (!c) return fail(HOPRELAY_EINVAL, "fd: a null handle");
  if (!c->impl) return closed<hoprelay_consumer>("fd");
  return c->impl->fd();
}

int hoprelay_consumer_process(hoprelay_consumer* c) {
  return call(c, "process", [&](auto& impl) { return impl.process(); });
}

void hoprelay_consumer_close(hoprelay_consumer* c) {
  if (!c) return;
  InCall<hoprelay_consumer> in(*c, "close");
  if (!in.taken()) return;
  LogScope scope(c->route);
  c->impl.reset();  // the shell stays until destroy (a second close does nothing)
}

void hoprelay_consumer_destroy(hoprelay_consumer* c) {
  if (!c) return;
  {
    InCall<hoprelay_consumer> in(*c, "destroy");
    if (!in.taken()) return;  // freed under the other thread's call, it would crash there
    LogScope scope(c->route);
    c->impl.reset();
  }
  delete c;
}

}  // extern "C"
