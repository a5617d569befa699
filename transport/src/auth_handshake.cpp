// Each side's half of the pre-shared key exchange (auth_handshake.h).
#include "hoprelay/transport/auth_handshake.h"

#include <cstring>

namespace hoprelay::transport {

const Nonce& AuthAcceptor::challenge() {
  challenge_ = fresh_nonce();
  return challenge_;
}

AuthAcceptor::Answer AuthAcceptor::check(const AuthKey& key, std::span<const std::byte> hello,
                                         std::span<const std::byte> payload) {
  if (payload.size() != kAuthSize) return Answer::kMalformed;
  // The AUTH payload: the sender's nonce, then its MAC over both nonces and its hello.
  std::memcpy(client_.data(), payload.data(), kNonceSize);
  if (!mac_matches(key.client_proof(challenge_, client_, hello), payload.subspan(kNonceSize))) {
    return Answer::kWrongKey;
  }
  return Answer::kOk;
}

Mac AuthAcceptor::proof(const AuthKey& key, std::span<const std::byte> welcome) const {
  return key.server_proof(client_, challenge_, welcome);
}

std::string AuthAcceptor::wrong_key_text(std::string_view peer) {
  return "authentication failed: wrong auth_key_file, or not " + std::string(peer);
}

std::optional<std::string> AuthConnector::mismatch(bool peer_asks, bool have_key) {
  if (peer_asks && !have_key) {
    return "it asks for authentication and this node has no auth_key_file: give both the same "
           "topology";
  }
  if (!peer_asks && have_key) {
    return "it did not authenticate itself (its topology has no auth_key_file?); an impostor "
           "could be listening at its address";
  }
  return std::nullopt;
}

bool AuthConnector::answer(const AuthKey& key, std::span<const std::byte> challenge,
                           std::span<const std::byte> hello, std::byte* out) {
  if (challenged_ || challenge.size() != kNonceSize) return false;
  challenged_ = true;
  std::memcpy(challenge_.data(), challenge.data(), kNonceSize);
  nonce_ = fresh_nonce();
  const Mac proof = key.client_proof(challenge_, nonce_, hello);
  std::memcpy(out, nonce_.data(), kNonceSize);
  std::memcpy(out + kNonceSize, proof.data(), kMacSize);
  return true;
}

std::optional<std::string> AuthConnector::check_welcome(const AuthKey& key,
                                                        std::span<const std::byte> welcome,
                                                        std::span<const std::byte> mac,
                                                        std::string_view peer) const {
  if (!challenged_) return "it welcomed this node without a challenge";
  if (mac.size() != kMacSize || !mac_matches(key.server_proof(nonce_, challenge_, welcome), mac)) {
    return "its answer to our challenge is wrong: wrong auth_key_file, or not " + std::string(peer);
  }
  return std::nullopt;
}

}  // namespace hoprelay::transport
