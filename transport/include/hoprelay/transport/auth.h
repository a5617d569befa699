// Pre-shared key admission (docs/security.md, "Admission"): a challenge-response over fresh
// nonces, in both directions, so that a host on the fabric can neither pass for a declared node
// (it cannot answer the receiver's challenge) nor pass for a downstream node (it cannot answer
// the sender's). Both transports run the same exchange with the same messages; only where the
// bytes travel differs (docs/protocol.md).
//
//   sender                                   receiver
//   hello (name, role, origin)        ──►
//                                     ◄──    challenge: server nonce Ns
//   auth: client nonce Nc,            ──►
//         HMAC(K, "client" | Ns | Nc | hello)
//                                     ◄──    welcome + HMAC(K, "server" | Nc | Ns | welcome)
//
// Each MAC covers both nonces, so neither can be replayed into another connection, and the
// bytes the peer acts on (the hello's name, the welcome's credits and ring address), so they
// cannot be swapped in flight. HMAC-SHA-256 from OpenSSL's libcrypto.
#pragma once

#include <array>
#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace hoprelay::transport {

inline constexpr size_t kNonceSize = 32;
inline constexpr size_t kMacSize = 32;
// AUTH frame payload: client nonce, then the client's MAC.
inline constexpr uint32_t kAuthSize = kNonceSize + kMacSize;
// Shortest key file accepted: 256 bits (`head -c 32 /dev/urandom`).
inline constexpr size_t kMinKeySize = 32;

using Nonce = std::array<std::byte, kNonceSize>;
using Mac = std::array<std::byte, kMacSize>;

class AuthKey {
 public:
  // Reads the key file (its bytes are the key). Throws TransportError saying what to do when
  // it cannot be read, is shorter than kMinKeySize, or is readable by other users.
  static std::shared_ptr<const AuthKey> load(const std::string& path);
  explicit AuthKey(std::vector<std::byte> secret);
  ~AuthKey();
  AuthKey(const AuthKey&) = delete;
  AuthKey& operator=(const AuthKey&) = delete;

  // What the connecting side sends: it knows the key, for this challenge and this hello.
  Mac client_proof(const Nonce& server, const Nonce& client,
                   std::span<const std::byte> hello) const;
  // What the accepting side sends back with its welcome.
  Mac server_proof(const Nonce& client, const Nonce& server,
                   std::span<const std::byte> welcome) const;

 private:
  Mac mac(std::string_view label, const Nonce& first, const Nonce& second,
          std::span<const std::byte> message) const;

  std::vector<std::byte> secret_;
};

// 32 bytes from the kernel's CSPRNG (getrandom).
Nonce fresh_nonce();
// Constant-time comparison of a MAC with `received` (which must be kMacSize bytes).
bool mac_matches(const Mac& expected, std::span<const std::byte> received);

}  // namespace hoprelay::transport
