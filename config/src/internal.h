// Helpers shared by the config sources; not part of the library's interface.
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hoprelay/config/topology.h"

namespace hoprelay::config::internal {

// The TOML spelling of each enum value, in the order error messages list them.
template <class E>
struct Spelling {
  std::string_view text;
  E value;
};
inline constexpr std::array<Spelling<TransportKind>, 3> kTransportSpellings{{
    {"auto", TransportKind::kAuto},
    {"verbs", TransportKind::kVerbs},
    {"tcp", TransportKind::kTcp},
}};
inline constexpr std::array<Spelling<Route>, 3> kRouteSpellings{{
    {"broadcast", Route::kBroadcast},
    {"round-robin", Route::kRoundRobin},
    {"hash", Route::kHash},
}};
inline constexpr std::array<Spelling<Ingress>, 2> kIngressSpellings{{
    {"write", Ingress::kWrite},
    {"send", Ingress::kSend},
}};
inline constexpr std::array<Spelling<Forward>, 2> kForwardSpellings{{
    {"send", Forward::kSend},
    {"write", Forward::kWrite},
}};
inline constexpr std::array<Spelling<Poll>, 2> kPollSpellings{{
    {"event", Poll::kEvent},
    {"busy", Poll::kBusy},
}};
inline constexpr std::array<Spelling<OnPeerDown>, 3> kOnPeerDownSpellings{{
    {"block", OnPeerDown::kBlock},
    {"drop-after", OnPeerDown::kDropAfter},
    {"bypass", OnPeerDown::kBypass},
}};

// What a TOML syntax error at line:col most likely is, as words to append to the parser's
// description (" (the array opened at 6:9 is still open here: a ']' missing?)"), or "".
std::string syntax_hint(std::string_view text, uint32_t line, uint32_t col,
                        std::string_view description);

// Optimal-string-alignment distance (Levenshtein plus adjacent transpositions, so "lsiten" is
// one edit from "listen"), compared case-insensitively.
size_t edit_distance(std::string_view a, std::string_view b);

// `path` made absolute (from the working directory) and normal ("a/./b" is "a/b"), for
// messages.
std::string absolute_path(const std::string& path);

// The candidate closest to `input`, when close enough to be a plausible typo: at most two
// edits, and no more than half the length of the longer word (so "b" does not suggest "a").
std::optional<std::string_view> closest(std::string_view input,
                                        const std::vector<std::string_view>& candidates);

// "; did you mean \"x\"?" when closest() finds one, else "".
std::string did_you_mean(std::string_view input, const std::vector<std::string_view>& candidates);

// parse_endpoint() with the reason it failed: either `endpoint` is set or `error` says what is
// wrong, written to follow "... is not a valid address: ".
struct EndpointParse {
  std::optional<Endpoint> endpoint;
  std::string error;
};
EndpointParse parse_endpoint_explained(std::string_view text);

// Node names travel in the RDMA CM connection hello, whose 56 bytes of private data also
// carry a header; 48 bytes is what is left for the name.
inline constexpr size_t kMaxNodeNameBytes = 48;
// A node name's characters: letters, digits, '_', '.' and '-', at least one.
bool node_name_charset_ok(std::string_view name);

// Key used to tell whether two endpoints are the same socket address: literal IPs in their
// canonical form (so "[::1]" and "[0:0::1]" collide), host names lowercased.
std::string endpoint_identity(const Endpoint& endpoint);

}  // namespace hoprelay::config::internal
