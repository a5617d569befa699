// The node's logger ("node"), shared by the files Node is split into.
#pragma once

#include <spdlog/logger.h>

namespace hoprelay::daemon {
spdlog::logger& node_log();
}
