// The pre-shared key exchange of one link (auth.h has the messages and the MACs), each side's
// half as a small state object: the nonces it holds, the order frames must come in, the layout
// of the AUTH payload, and the words of every refusal. Both transports run it, and each keeps
// only where the bytes travel: TCP sends CHALLENGE, AUTH and WELCOME frames on the stream;
// verbs puts the challenge in rdma_cm's private data, then one SEND each way
// (docs/protocol.md, "Admission").
//
// Owner: the link, on its event loop's thread; a fresh connection starts a fresh object.
// Setup path only.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "hoprelay/transport/auth.h"

namespace hoprelay::transport {

// The accepting side (the receiver of a link).
class AuthAcceptor {
 public:
  // The peer was admitted by name: the challenge to send it (a fresh nonce).
  const Nonce& challenge();
  const Nonce& last_challenge() const { return challenge_; }
  enum class Answer { kOk, kMalformed, kWrongKey };
  // The AUTH frame's payload, for the hello the peer sent (its bytes as received): kOk when the
  // peer holds the key, and then proof() may be sent.
  Answer check(const AuthKey& key, std::span<const std::byte> hello,
               std::span<const std::byte> payload);
  // The MAC that follows our welcome body `welcome`: it proves to the sender that this end
  // holds the key too, for this connection (after check() said kOk).
  Mac proof(const AuthKey& key, std::span<const std::byte> welcome) const;
  // Why a kWrongKey answer is refused, for the log and the sender's REJECT.
  static std::string wrong_key_text(std::string_view peer);

 private:
  Nonce challenge_{};
  Nonce client_{};
};

// The connecting side (the sender of a link, a producer).
class AuthConnector {
 public:
  // Whether the peer's asking for authentication matches this node's key: nullopt when it
  // does, else why this node will not send to it (with what to do).
  static std::optional<std::string> mismatch(bool peer_asks, bool have_key);
  // The peer's challenge, for the hello this end sent: writes the AUTH payload (kAuthSize bytes)
  // to `out`. False when the peer challenged twice on one connection.
  bool answer(const AuthKey& key, std::span<const std::byte> challenge,
              std::span<const std::byte> hello, std::byte* out);
  // The MAC after the peer's welcome body: nullopt when it proves the key for our nonce and
  // the peer's challenge, else why the peer is refused.
  std::optional<std::string> check_welcome(const AuthKey& key, std::span<const std::byte> welcome,
                                           std::span<const std::byte> mac,
                                           std::string_view peer) const;

 private:
  Nonce challenge_{};
  Nonce nonce_{};
  bool challenged_ = false;
};

}  // namespace hoprelay::transport
