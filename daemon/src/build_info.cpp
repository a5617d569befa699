#include "hoprelay/daemon/build_info.h"

#include <fmt/format.h>

#include "git_commit.h"  // generated at build time by daemon/git_commit.cmake
#include "hoprelay/stage_abi.h"
#include "hoprelay/transport/wire.h"

namespace hoprelay::daemon {

const BuildInfo& build_info() {
  // Both transports are always built (libibverbs is a build dependency); which one a node uses
  // is decided at start from its `transport` key and the devices present.
  static const BuildInfo info{
      HOPRELAY_VERSION,
      HOPRELAY_GIT_COMMIT,
      fmt::format("{}.{}", HOPRELAY_STAGE_ABI_MAJOR, HOPRELAY_STAGE_ABI_MINOR),
      std::to_string(transport::kWireVersion),
      "tcp, verbs",
  };
  return info;
}

std::string version_text(std::string_view program) {
  const BuildInfo& b = build_info();
  return fmt::format(
      "{} {}\ncommit: {}\nstage ABI: {}\nwire protocol: {} (speaks {} to {})\ntransports: {}",
      program, b.version, b.commit, b.stage_abi, b.protocol, transport::kWireVersionMin,
      transport::kWireVersion, b.transports);
}

}  // namespace hoprelay::daemon
