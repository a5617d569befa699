#include "embedded_node.h"

#include "hoprelay/daemon/cpu_pin.h"
#include "hoprelay/stages/stage.h"
#include "status.h"

namespace hoprelay::client {

std::unique_ptr<daemon::Node> start_node(std::shared_ptr<const config::Topology> topology,
                                         const std::string& name, transport::EventLoop& loop,
                                         const std::function<void(daemon::Node&)>& prepare) {
  const config::NodeSpec* spec = topology->find(name);
  // As hoprelayd does: a CPU of `cpu` this process may not run on stops it before anything
  // starts (the stage workers pin themselves to them; the application's thread is not pinned).
  for (uint32_t cpu : spec->cpu) {
    if (std::string why = daemon::cpu_refusal(cpu); !why.empty()) {
      throw ClientError(HOPRELAY_ECONFIG,
                        config::Diagnostic{topology->path, spec->cpu_pos,
                                           "nodes." + name + ".cpu: cannot start: " + why}
                            .format());
    }
  }
  std::unique_ptr<daemon::Node> node;
  try {
    stages::Stage stage(stages::resolve(spec->stage.plugin), spec->name, spec->stage.params);
    node = std::make_unique<daemon::Node>(topology, name, loop, std::move(stage));
  } catch (const stages::StageError& e) {
    throw ClientError(HOPRELAY_ECONFIG, e.what());
  }
  prepare(*node);
  try {
    node->start();
  } catch (const std::exception& e) {
    throw ClientError(HOPRELAY_EUNAVAILABLE,
                      "cannot run node " + name + ": " + e.what() +
                          " (is a hoprelayd, a consumer or a producer running this node?)");
  }
  return node;
}

}  // namespace hoprelay::client
