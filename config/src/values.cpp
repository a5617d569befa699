// Scalar value syntaxes of the topology file (sizes, durations, addresses), typo suggestions
// and paths for messages.
#include <arpa/inet.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdint>
#include <filesystem>
#include <utility>

#include "internal.h"

namespace hoprelay::config {
namespace {

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}

char ascii_lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

bool is_ipv4_literal(const std::string& host) {
  in_addr addr{};
  return inet_pton(AF_INET, host.c_str(), &addr) == 1;
}

// IPv6 literal, optionally with a zone ("fe80::1%eth0"), which link-local addresses need.
bool is_ipv6_literal(std::string_view host) {
  size_t percent = host.find('%');
  std::string addr_part(host.substr(0, percent));
  if (percent != std::string_view::npos) {
    std::string_view zone = host.substr(percent + 1);
    if (zone.empty()) return false;
    for (char c : zone) {
      if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-')) {
        return false;
      }
    }
  }
  in6_addr addr{};
  return inet_pton(AF_INET6, addr_part.c_str(), &addr) == 1;
}

// Returns an error message, or "" when `port` is a valid port number.
std::string check_port(std::string_view port, uint16_t* out) {
  if (port.empty()) return "missing port number after ':'";
  if (!std::all_of(port.begin(), port.end(), is_digit)) {
    return "port \"" + std::string(port) + "\" is not a number";
  }
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (ec != std::errc() || value == 0 || value > 65535) {
    return "port " + std::string(port) + " is out of range 1..65535";
  }
  *out = static_cast<uint16_t>(value);
  return "";
}

// "64KiB", "30 s": the number and the unit after it (possibly empty). Spaces are allowed
// between the two, nowhere else; nullopt without digits or beyond 64 bits.
std::optional<std::pair<uint64_t, std::string_view>> split_number_unit(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && is_digit(text[digits])) ++digits;
  if (digits == 0) return std::nullopt;
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + digits, value);
  if (ec != std::errc()) return std::nullopt;  // more than 64 bits
  std::string_view unit = text.substr(digits);
  size_t spaces = 0;
  while (spaces < unit.size() && unit[spaces] == ' ') ++spaces;
  if (spaces > 0 && spaces == unit.size()) return std::nullopt;
  unit.remove_prefix(spaces);
  return std::pair{value, unit};
}

// A unit of a value with units, and how many of the smallest it is.
struct Unit {
  std::string_view name;
  uint64_t scale;
};
// Milliseconds; smallest first.
constexpr std::array<Unit, 4> kDurationUnits{{
    {"ms", 1},
    {"s", 1000},
    {"m", 60 * 1000},
    {"h", 60 * 60 * 1000},
}};
// Bits per second, SI (as tc and NIC speeds are written); smallest first.
constexpr std::array<Unit, 5> kRateUnits{{
    {"bit", 1},
    {"kbit", 1000},
    {"Mbit", 1000 * 1000},
    {"Gbit", 1000 * 1000 * 1000},
    {"Tbit", uint64_t{1000} * 1000 * 1000 * 1000},
}};

// The scale of `unit` among `units`, 0 when it is none of them.
template <size_t N>
uint64_t scale_of(std::string_view unit, const std::array<Unit, N>& units) {
  for (const Unit& u : units) {
    if (unit == u.name) return u.scale;
  }
  return 0;
}

// `value` in the largest of `units` that holds it exactly ("" for 0 or none).
template <size_t N>
std::string in_largest_unit(uint64_t value, const std::array<Unit, N>& units) {
  for (auto u = units.rbegin(); u != units.rend(); ++u) {
    if (value != 0 && value % u->scale == 0)
      return std::to_string(value / u->scale) + std::string(u->name);
  }
  return {};
}

}  // namespace

std::string Endpoint::to_string() const {
  // A ':' in the host can only be an IPv6 literal, which needs brackets to keep the port apart.
  if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
  return host + ":" + std::to_string(port);
}

std::optional<uint64_t> parse_size(std::string_view text) {
  auto parsed = split_number_unit(text);
  if (!parsed) return std::nullopt;
  auto [value, unit] = *parsed;
  uint64_t scale = 0;
  if (unit.empty() || unit == "B") {
    scale = 1;
  } else if (unit == "KiB") {
    scale = 1024;
  } else if (unit == "MiB") {
    scale = 1024 * 1024;
  } else if (unit == "GiB") {
    scale = uint64_t{1} << 30;
  } else if (unit == "TiB") {
    scale = uint64_t{1} << 40;
  } else {
    return std::nullopt;
  }
  if (value > UINT64_MAX / scale) return std::nullopt;
  return value * scale;
}

std::optional<uint64_t> parse_rate(std::string_view text) {
  auto parsed = split_number_unit(text);
  if (!parsed) return std::nullopt;
  auto [value, unit] = *parsed;
  if (unit.ends_with("/s")) unit.remove_suffix(2);
  const uint64_t scale = scale_of(unit, kRateUnits);
  if (scale == 0 || value > UINT64_MAX / scale) return std::nullopt;
  return value * scale;
}

std::string rate_text(uint64_t bits_per_second) {
  std::string text = in_largest_unit(bits_per_second, kRateUnits);
  return text.empty() ? "0bit" : text;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto parsed = split_number_unit(text);
  if (!parsed) return std::nullopt;
  auto [value, unit] = *parsed;
  // A bare number is refused: "30" could mean seconds as well as milliseconds.
  const uint64_t scale = scale_of(unit, kDurationUnits);
  if (scale == 0 || value > uint64_t(INT64_MAX) / scale) return std::nullopt;
  return std::chrono::milliseconds(static_cast<int64_t>(value * scale));
}

std::string duration_text(std::chrono::milliseconds duration) {
  const int64_t ms = duration.count();
  std::string text = ms > 0 ? in_largest_unit(uint64_t(ms), kDurationUnits) : std::string();
  return text.empty() ? std::to_string(ms) + "ms" : text;
}

std::optional<Endpoint> parse_endpoint(std::string_view text) {
  return internal::parse_endpoint_explained(text).endpoint;
}

uint64_t fnv1a64(std::string_view bytes) {
  uint64_t hash = 14695981039346656037ull;
  for (char c : bytes) {
    hash ^= static_cast<unsigned char>(c);
    hash *= 1099511628211ull;
  }
  return hash;
}

namespace internal {

EndpointParse parse_endpoint_explained(std::string_view text) {
  constexpr std::string_view kForm = " (expected HOST:PORT or [IPV6]:PORT)";
  EndpointParse result;
  Endpoint endpoint;
  std::string_view port;
  if (text.empty()) {
    result.error = "empty address" + std::string(kForm);
    return result;
  }
  if (text.front() == '[') {
    size_t close = text.find(']');
    if (close == std::string_view::npos) {
      result.error = "'[' without a closing ']'";
      return result;
    }
    std::string_view host = text.substr(1, close - 1);
    if (host.empty()) {
      result.error = "empty host between '[' and ']'";
      return result;
    }
    if (!is_ipv6_literal(host)) {
      result.error =
          "\"" + std::string(host) + "\" is not an IPv6 address (brackets are only for IPv6)";
      return result;
    }
    std::string_view rest = text.substr(close + 1);
    if (rest.empty()) {
      result.error = "missing port" + std::string(kForm);
      return result;
    }
    if (rest.front() != ':') {
      result.error = "expected ':' and a port after ']'";
      return result;
    }
    endpoint.host = std::string(host);
    port = rest.substr(1);
  } else {
    if (text.find_first_of("[]") != std::string_view::npos) {
      result.error = "brackets must enclose the whole IPv6 host, as in [::1]:7001";
      return result;
    }
    size_t colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      result.error = "missing port" + std::string(kForm);
      return result;
    }
    std::string_view host = text.substr(0, colon);
    if (text.find("://") != std::string_view::npos) {
      result.error = "a URL is not an address: write host:port alone, as in 10.0.0.1:7001";
      return result;
    }
    if (host.find(':') != std::string_view::npos) {
      result.error = "an IPv6 address must be in brackets, as in [::1]:7001";
      return result;
    }
    if (host.empty()) {
      result.error = "missing host before ':'";
      return result;
    }
    std::string host_string(host);
    bool numeric =
        std::all_of(host.begin(), host.end(), [](char c) { return is_digit(c) || c == '.'; });
    if (numeric) {
      // All digits and dots can only mean an IPv4 address; "127.1" or "300.0.0.1" are typos,
      // not host names.
      if (!is_ipv4_literal(host_string)) {
        result.error = "\"" + host_string + "\" is not an IPv4 address";
        return result;
      }
    } else {
      bool ok = host.size() <= 253 && host.front() != '.' && host.front() != '-';
      for (char c : host) {
        if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == '_')) {
          ok = false;
        }
      }
      if (!ok) {
        result.error = "\"" + host_string + "\" is not a valid host name";
        return result;
      }
    }
    endpoint.host = std::move(host_string);
    port = text.substr(colon + 1);
  }
  result.error = check_port(port, &endpoint.port);
  if (result.error.empty()) result.endpoint = std::move(endpoint);
  return result;
}

bool node_name_charset_ok(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-';
  });
}

std::string endpoint_identity(const Endpoint& endpoint) {
  std::string host = endpoint.host;
  char buf[INET6_ADDRSTRLEN] = {};
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    host = inet_ntop(AF_INET, &v4, buf, sizeof(buf));
  } else if (host.find('%') == std::string::npos && inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    host = "[" + std::string(inet_ntop(AF_INET6, &v6, buf, sizeof(buf))) + "]";
  } else {
    std::transform(host.begin(), host.end(), host.begin(), ascii_lower);
  }
  return host + ":" + std::to_string(endpoint.port);
}

size_t edit_distance(std::string_view a, std::string_view b) {
  // Three rolling rows of the optimal-string-alignment table.
  std::vector<size_t> prev2(b.size() + 1), prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t cost = ascii_lower(a[i - 1]) == ascii_lower(b[j - 1]) ? 0 : 1;
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && ascii_lower(a[i - 1]) == ascii_lower(b[j - 2]) &&
          ascii_lower(a[i - 2]) == ascii_lower(b[j - 1])) {
        cur[j] = std::min(cur[j], prev2[j - 2] + 1);
      }
    }
    std::swap(prev2, prev);
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

std::string absolute_path(const std::string& path) {
  std::error_code ec;
  auto absolute = std::filesystem::absolute(path, ec);
  return ec ? path : absolute.lexically_normal().string();
}

std::optional<std::string_view> closest(std::string_view input,
                                        const std::vector<std::string_view>& candidates) {
  std::optional<std::string_view> best;
  size_t best_distance = SIZE_MAX;
  for (std::string_view candidate : candidates) {
    if (candidate == input) continue;
    size_t d = edit_distance(input, candidate);
    size_t longer = std::max(input.size(), candidate.size());
    if (d <= 2 && d * 2 <= longer && d < best_distance) {
      best = candidate;
      best_distance = d;
    }
  }
  return best;
}

std::string did_you_mean(std::string_view input, const std::vector<std::string_view>& candidates) {
  auto match = closest(input, candidates);
  if (!match) return "";
  return "; did you mean \"" + std::string(*match) + "\"?";
}

}  // namespace internal
}  // namespace hoprelay::config
