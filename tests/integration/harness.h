// Test harness for integration tests: real processes on loopback, real files, exact counts.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace hoprelay::test {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// A child process whose stdout+stderr go to `log`. Killed (SIGKILL) if still running when the
// object goes, so a failing test never leaves daemons behind.
class Process {
 public:
  Process(std::vector<std::string> argv, fs::path log);
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  pid_t pid() const { return pid_; }
  void signal(int sig) const;
  // Exit code (128+signal when killed); -1 if still running after `timeout`.
  int wait(std::chrono::milliseconds timeout);
  bool running();
  std::string output() const;
  long rss_kib() const;  // VmRSS from /proc

 private:
  pid_t pid_ = -1;
  int status_ = -1;
  bool reaped_ = false;
  fs::path log_;
};

struct RunResult {
  int code = -1;
  std::string output;
};
// Runs a command to completion (with a timeout), capturing stdout+stderr.
RunResult run(const std::vector<std::string>& argv, std::chrono::seconds timeout = 120s);

uint16_t free_port();
bool wait_until(const std::function<bool()>& pred, std::chrono::milliseconds timeout);
void write_file(const fs::path& path, const std::string& text);
std::string read_file(const fs::path& path);
// `bytes` of a fast deterministic generator (xorshift) from `seed`.
void write_random(const fs::path& path, uint64_t bytes, uint64_t seed);
// The two files hold the same bytes (cmp).
bool same_file(const fs::path& a, const fs::path& b);
// A file's size, 0 when it is not there (yet).
uint64_t size_of(const fs::path& p);

// The counts in a verify-sink report (top level); all -1 when the file is not there yet.
struct Report {
  long long received = -1, duplicates = -1, missing = -1, corrupt = -1;
  long long reordered = -1;  // first seen after a later message of its origin
};
Report read_report(const fs::path& path);

// How many times `needle` occurs in `text` (a log line said once per transition, say).
size_t occurrences(const std::string& text, const std::string& needle);

struct HttpResponse {
  int status = 0;  // 0: no connection or no valid answer
  std::string body;
};
// A minimal HTTP/1.0 GET to 127.0.0.1:port (the server closes the connection after the body),
// with 5 s timeouts.
HttpResponse http_get(uint16_t port, const std::string& target);
// How many lines of `text` (a log) contain `what`.
size_t lines_with(const std::string& text, const std::string& what);
// GET http://127.0.0.1:port/metrics; empty on failure.
std::string scrape(uint16_t port);
// Sum of the samples of `metric` whose label set contains `labels` (e.g. "reason=\"x\"").
double metric_value(const std::string& exposition, const std::string& metric,
                    const std::string& labels = "");

// A fresh directory per test, removed on success.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  const fs::path& path() const { return path_; }
  fs::path operator/(const std::string& name) const { return path_ / name; }

 private:
  fs::path path_;
};

}  // namespace hoprelay::test
