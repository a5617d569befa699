#include "harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>
#include <thread>

namespace hoprelay::test {

Process::Process(std::vector<std::string> argv, fs::path log) : log_(std::move(log)) {
  pid_ = fork();
  if (pid_ == 0) {
    int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    dup2(fd, 2);
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
}

Process::~Process() {
  if (running()) {
    ::kill(pid_, SIGKILL);
    wait(5s);
  }
}

void Process::signal(int sig) const {
  ::kill(pid_, sig);
}

bool Process::running() {
  if (reaped_) return false;
  int st;
  pid_t r = waitpid(pid_, &st, WNOHANG);
  if (r == pid_) {
    reaped_ = true;
    status_ = st;
    return false;
  }
  return true;
}

int Process::wait(std::chrono::milliseconds timeout) {
  wait_until([&] { return !running(); }, timeout);
  if (!reaped_) return -1;
  if (WIFEXITED(status_)) return WEXITSTATUS(status_);
  return 128 + WTERMSIG(status_);
}

std::string Process::output() const {
  return read_file(log_);
}

long Process::rss_kib() const {
  std::ifstream in("/proc/" + std::to_string(pid_) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return -1;
}

RunResult run(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  static int counter = 0;
  fs::path log = fs::temp_directory_path() /
                 ("hoprelay-run-" + std::to_string(getpid()) + "-" + std::to_string(counter++));
  RunResult r;
  {
    Process p(argv, log);
    r.code = p.wait(timeout);
  }
  r.output = read_file(log);
  fs::remove(log);
  return r;
}

namespace {

// The first port of the kernel's ephemeral range (ports it gives to connect() and bind(0)).
int ephemeral_low() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  int low = 0;
  return in >> low ? low : 0;
}

// Binds a TCP socket to 127.0.0.1:port (0: the kernel's choice) and closes it again; the port
// it had, or 0 when it could not bind.
uint16_t try_bind(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  socklen_t len = sizeof(a);
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
            getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0;
  ::close(fd);
  return ok ? ntohs(a.sin_port) : 0;
}

}  // namespace

uint16_t free_port() {
  // A port below the ephemeral range, so that no connect() on this machine (the daemons' own
  // links included) is given it as its source port between this call and the daemon's bind:
  // with 63 daemons connecting at once that happened (a leaf found its listen port taken).
  // The ports come in turn from one counter that every test process on the machine shares (a
  // file in the temporary directory, under flock): ctest runs two tests at once, and random
  // picks made two 63-node trees (126 ports each) collide. Without room below the range, or
  // without the file, the kernel's choice (bind to port 0).
  const int high = ephemeral_low();
  const int low = std::max(10000, high - 20000);
  const fs::path counter = fs::temp_directory_path() / "hoprelay-test-ports";
  int fd = high > low + 1000 ? ::open(counter.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666) : -1;
  if (fd < 0) return try_bind(0);
  uint16_t port = 0;
  if (::flock(fd, LOCK_EX) == 0) {
    uint32_t next = 0;
    if (::pread(fd, &next, sizeof(next), 0) != static_cast<ssize_t>(sizeof(next))) {
      next = static_cast<uint32_t>(::getpid());
    }
    for (int attempt = 0; attempt < 1000 && port == 0; ++attempt) {
      port = try_bind(static_cast<uint16_t>(low + next++ % static_cast<uint32_t>(high - low)));
    }
    if (::pwrite(fd, &next, sizeof(next), 0) != static_cast<ssize_t>(sizeof(next))) port = 0;
    ::flock(fd, LOCK_UN);
  }
  ::close(fd);
  return port != 0 ? port : try_bind(0);
}

bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

void write_random(const fs::path& path, uint64_t bytes, uint64_t seed) {
  std::ofstream out(path, std::ios::binary);
  std::vector<uint64_t> block(1 << 17);  // 1 MiB at a time
  uint64_t x = seed | 1;
  for (uint64_t done = 0; done < bytes;) {
    for (auto& w : block) {
      x ^= x << 13;
      x ^= x >> 7;
      x ^= x << 17;
      w = x;
    }
    uint64_t n = std::min<uint64_t>(bytes - done, block.size() * sizeof(uint64_t));
    out.write(reinterpret_cast<const char*>(block.data()), static_cast<std::streamsize>(n));
    done += n;
  }
}

uint64_t size_of(const fs::path& p) {
  std::error_code ec;
  auto n = fs::file_size(p, ec);
  return ec ? 0 : n;
}

bool same_file(const fs::path& a, const fs::path& b) {
  return run({"/usr/bin/cmp", "-s", a.string(), b.string()}).code == 0;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

size_t occurrences(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1)) ++n;
  return n;
}

Report read_report(const fs::path& path) {
  Report r;
  std::string json = read_file(path);
  auto grab = [&](const char* key) -> long long {
    // Top-level keys are indented by two spaces; per-origin ones live on other lines.
    std::regex re(std::string("\n  \"") + key + "\": ([0-9]+)");
    std::smatch m;
    return std::regex_search(json, m, re) ? std::stoll(m[1]) : -1;
  };
  r.received = grab("received");
  r.duplicates = grab("duplicates");
  r.missing = grab("missing");
  r.corrupt = grab("corrupt");
  r.reordered = grab("reordered");
  return r;
}

HttpResponse http_get(uint16_t port, const std::string& target) {
  HttpResponse r;
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) < 0) {
    ::close(fd);
    return r;
  }
  std::string req = "GET " + target + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
  ::send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = ::recv(fd, buf, sizeof(buf), 0)) > 0) resp.append(buf, size_t(n));
  ::close(fd);
  auto head_end = resp.find("\r\n\r\n");
  if (head_end == std::string::npos) return r;
  std::smatch m;
  std::string head = resp.substr(0, head_end);
  if (!std::regex_search(head, m, std::regex(R"(^HTTP/1\.[01] (\d{3}))"))) return r;
  r.status = std::stoi(m[1]);
  r.body = resp.substr(head_end + 4);
  return r;
}

std::string scrape(uint16_t port) {
  HttpResponse r = http_get(port, "/metrics");
  return r.status == 200 ? r.body : "";
}

size_t lines_with(const std::string& text, const std::string& what) {
  std::istringstream in(text);
  size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.find(what) != std::string::npos;
  return n;
}

double metric_value(const std::string& exposition, const std::string& metric,
                    const std::string& labels) {
  double sum = 0;
  std::istringstream in(exposition);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line.rfind(metric, 0) != 0) continue;
    char next = line.size() > metric.size() ? line[metric.size()] : ' ';
    if (next != '{' && next != ' ') continue;  // a longer metric name with the same prefix
    if (!labels.empty() && line.find(labels) == std::string::npos) continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

TempDir::TempDir() {
  std::random_device rd;
  path_ = fs::temp_directory_path() / ("hoprelay-it-" + std::to_string(rd()));
  fs::create_directories(path_);
}

TempDir::~TempDir() {
  // Kept when the test failed: the daemons' logs and reports are the evidence.
  if (!::testing::Test::HasFailure()) fs::remove_all(path_);
}

}  // namespace hoprelay::test
