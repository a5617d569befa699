// What this build is: one source for `hoprelayd --version`, `hoprelay --version` and the
// hoprelay_build_info metric, so the three cannot disagree.
#pragma once

#include <string>
#include <string_view>

namespace hoprelay::daemon {

struct BuildInfo {
  std::string_view version;  // the project version (CMakeLists.txt)
  std::string_view commit;   // git describe of the source tree, "unknown" outside git
  std::string stage_abi;     // HOPRELAY_STAGE_ABI_MAJOR.MINOR that plugins are checked against
  std::string protocol;      // the wire protocol version spoken on every link (kWireVersion)
  std::string transports;    // the transports compiled in, comma-separated
};

const BuildInfo& build_info();

// The --version text of `program`: one "key: value" line each, after "PROGRAM VERSION".
std::string version_text(std::string_view program);

}  // namespace hoprelay::daemon
