// Warnings the core has for the user: not errors (the work goes on), but something the user
// should hear about, such as a non-deterministic cuDNN algorithm taken under
// hpcnn.config.set_deterministic('warn'). The core cannot raise a Python warning itself (it runs
// without the GIL, and a warning filtered into an error must surface as an exception at a point
// the caller controls), so it queues the message here; the bindings take the queue after each
// call that may add to it and raise each message as a Python RuntimeWarning.
#pragma once

#include <string>
#include <vector>

namespace hpcnn {

// Queues `message` (thread-safe; the same message twice in a row is queued once).
void queue_warning(std::string message);
// Every queued message, oldest first, leaving the queue empty.
std::vector<std::string> take_warnings();

}  // namespace hpcnn
