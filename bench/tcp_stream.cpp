// Raw TCP reference (the ceiling) for bench/run.sh: one hop on loopback, no relay, no
// acknowledgements. A sender thread writes COUNT messages of SIZE bytes, each behind a 4-byte
// length prefix, batched into 256 KiB write()s; the receiver reads 256 KiB at a time and walks
// the length prefixes. Prints
//   tcp_stream SIZE COUNT SECONDS
// where SECONDS runs from the connection to the receiver having parsed the last message.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

void die(const char* what) {
  std::perror(what);
  std::exit(1);
}

constexpr size_t kChunk = 256 * 1024;

void write_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, n);
    if (w < 0) die("tcp_stream: write");
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: tcp_stream SIZE COUNT\n");
    return 2;
  }
  const uint32_t size = static_cast<uint32_t>(std::strtoul(argv[1], nullptr, 10));
  const uint64_t count = std::strtoull(argv[2], nullptr, 10);
  if (size == 0 || count == 0) {
    std::fprintf(stderr, "tcp_stream: SIZE and COUNT must be positive\n");
    return 2;
  }

  const int lfd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (lfd < 0) die("tcp_stream: socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("tcp_stream: bind");
  if (::listen(lfd, 1) < 0) die("tcp_stream: listen");
  socklen_t alen = sizeof addr;
  if (::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &alen) < 0) die("getsockname");

  std::thread sender([&] {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("tcp_stream: socket");
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("connect");
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    std::vector<char> payload(size, 'x');
    std::vector<char> buf;
    buf.reserve(kChunk + size + 4);
    for (uint64_t i = 0; i < count; ++i) {
      const uint32_t len = htonl(size);
      std::memcpy(payload.data(), &i, size < sizeof i ? size : sizeof i);
      const size_t at = buf.size();
      buf.resize(at + 4 + size);
      std::memcpy(buf.data() + at, &len, 4);
      std::memcpy(buf.data() + at + 4, payload.data(), size);
      if (buf.size() >= kChunk) {
        write_all(fd, buf.data(), buf.size());
        buf.clear();
      }
    }
    write_all(fd, buf.data(), buf.size());
    ::shutdown(fd, SHUT_WR);
    char c;
    while (::read(fd, &c, 1) > 0) {
    }
    ::close(fd);
  });

  const int fd = ::accept(lfd, nullptr, nullptr);
  if (fd < 0) die("tcp_stream: accept");
  const auto start = std::chrono::steady_clock::now();
  std::vector<char> buf(kChunk);
  uint64_t got = 0;
  uint64_t payload_bytes = 0;
  size_t need = 4;  // bytes still to skip or read of the current header or payload
  bool in_header = true;
  uint32_t header = 0;
  size_t header_have = 0;
  while (got < count) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) die("tcp_stream: read");
    if (n == 0) break;
    size_t off = 0;
    const size_t end = static_cast<size_t>(n);
    while (off < end) {
      const size_t take = std::min(need, end - off);
      if (in_header) {
        std::memcpy(reinterpret_cast<char*>(&header) + header_have, buf.data() + off, take);
        header_have += take;
      } else {
        payload_bytes += take;
      }
      off += take;
      need -= take;
      if (need == 0) {
        if (in_header) {
          need = ntohl(header);
          in_header = false;
          header_have = 0;
        } else {
          ++got;
          need = 4;
          in_header = true;
        }
      }
    }
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  ::close(fd);
  sender.join();
  ::close(lfd);
  if (got != count || payload_bytes != uint64_t{size} * count) {
    std::fprintf(stderr, "tcp_stream: received %llu messages, expected %llu\n",
                 static_cast<unsigned long long>(got), static_cast<unsigned long long>(count));
    return 1;
  }
  std::printf("tcp_stream %u %llu %.6f\n", size, static_cast<unsigned long long>(count), seconds);
  return 0;
}
