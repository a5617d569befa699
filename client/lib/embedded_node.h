// A node of the topology run inside the application, as hoprelayd runs it: the consumer's leaf
// (consumer.h) and the head of a producer that runs its head (producer.h). One place for what
// starting one takes, so that both refuse the same mistakes with the same words.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "hoprelay/config/topology.h"
#include "hoprelay/daemon/node.h"
#include "hoprelay/transport/event_loop.h"

namespace hoprelay::client {

// Builds node `name` of `topology` on `loop` (its stage resolved), calls `prepare` on it (a
// receiver, a device-loss handler: what must be set before start), and starts it: listening,
// its metrics endpoint if it has one, connecting downstream. Throws ClientError (status.h):
// ECONFIG for a `cpu` this process may not run on or a stage that does not load,
// EUNAVAILABLE when it cannot start (its port is taken: another process runs this node).
std::unique_ptr<daemon::Node> start_node(std::shared_ptr<const config::Topology> topology,
                                         const std::string& name, transport::EventLoop& loop,
                                         const std::function<void(daemon::Node&)>& prepare);

}  // namespace hoprelay::client
