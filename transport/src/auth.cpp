#include "hoprelay/transport/auth.h"

#include <fcntl.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "hoprelay/transport/transport.h"

namespace hoprelay::transport {
namespace {

constexpr size_t kMaxKeySize = 4096;

std::string how_to_create(const std::string& path) {
  return "create one with `head -c 32 /dev/urandom > " + path + " && chmod 600 " + path +
         "`, and copy the same file to every host of the topology";
}

}  // namespace

std::shared_ptr<const AuthKey> AuthKey::load(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int err = errno;
    if (err == EACCES) {
      // The key exists: making a new one would change the key every host shares.
      throw TransportError("cannot read auth_key_file " + path + ": " + std::strerror(err) +
                           " (this process runs as uid " + std::to_string(::geteuid()) +
                           "); give it read access without making the file readable by every "
                           "user: e.g. `chgrp hoprelay " +
                           path + " && chmod 640 " + path +
                           "` and run producers in group hoprelay (docs/security.md)");
    }
    throw TransportError("cannot read auth_key_file " + path + ": " + std::strerror(err) + "; " +
                         how_to_create(path));
  }
  struct stat st {};
  ::fstat(fd, &st);
  if (st.st_mode & S_IROTH) {
    ::close(fd);
    throw TransportError("auth_key_file " + path +
                         " is readable by every user of this host: `chmod 600 " + path +
                         "` (and chown it to the user hoprelayd runs as)");
  }
  std::vector<std::byte> secret(kMaxKeySize + 1);
  size_t have = 0;
  for (;;) {
    ssize_t n = ::read(fd, secret.data() + have, secret.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    have += size_t(n);
    if (have == secret.size()) break;
  }
  ::close(fd);
  if (have < kMinKeySize) {
    throw TransportError("auth_key_file " + path + " holds " + std::to_string(have) +
                         " bytes; at least " + std::to_string(kMinKeySize) +
                         " are needed: " + how_to_create(path));
  }
  if (have > kMaxKeySize) {
    throw TransportError("auth_key_file " + path + " is larger than " +
                         std::to_string(kMaxKeySize) + " bytes: is it the right file?");
  }
  secret.resize(have);
  return std::make_shared<const AuthKey>(std::move(secret));
}

AuthKey::AuthKey(std::vector<std::byte> secret) : secret_(std::move(secret)) {}

AuthKey::~AuthKey() {
  OPENSSL_cleanse(secret_.data(), secret_.size());
}

Mac AuthKey::mac(std::string_view label, const Nonce& first, const Nonce& second,
                 std::span<const std::byte> message) const {
  // Context-free label first, so a client's proof can never be taken for a server's.
  std::vector<unsigned char> input;
  input.reserve(label.size() + 1 + 2 * kNonceSize + message.size());
  input.insert(input.end(), label.begin(), label.end());
  input.push_back(0);
  auto append = [&input](std::span<const std::byte> b) {
    const auto* p = reinterpret_cast<const unsigned char*>(b.data());
    input.insert(input.end(), p, p + b.size());
  };
  append(first);
  append(second);
  append(message);
  Mac out{};
  unsigned int len = 0;
  if (!HMAC(EVP_sha256(), secret_.data(), static_cast<int>(secret_.size()), input.data(),
            input.size(), reinterpret_cast<unsigned char*>(out.data()), &len) ||
      len != kMacSize) {
    throw TransportError("HMAC-SHA-256 failed (libcrypto)");
  }
  return out;
}

Mac AuthKey::client_proof(const Nonce& server, const Nonce& client,
                          std::span<const std::byte> hello) const {
  return mac("hoprelay-1 client", server, client, hello);
}

Mac AuthKey::server_proof(const Nonce& client, const Nonce& server,
                          std::span<const std::byte> welcome) const {
  return mac("hoprelay-1 server", client, server, welcome);
}

Nonce fresh_nonce() {
  Nonce n{};
  size_t have = 0;
  while (have < n.size()) {
    ssize_t r = ::getrandom(n.data() + have, n.size() - have, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) throw TransportError(std::string("getrandom: ") + std::strerror(errno));
    have += size_t(r);
  }
  return n;
}

bool mac_matches(const Mac& expected, std::span<const std::byte> received) {
  return received.size() == kMacSize &&
         CRYPTO_memcmp(expected.data(), received.data(), kMacSize) == 0;
}

}  // namespace hoprelay::transport
