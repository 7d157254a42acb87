#include "protocol/version.h"

#include "protocol/mailbox.h"
#include "protocol/task_args.h"

#ifndef CANOPY_VERSION
#error "CANOPY_VERSION must be defined by the build"
#endif

namespace canopy {

std::string_view canopy_version() noexcept {
    return CANOPY_VERSION;
}

std::string version_line(std::string_view program) {
    return std::string(program) + " " + std::string(canopy_version()) + " (wire ABI: task args v" +
           std::to_string(TASK_ARGS_VERSION) + ", mailbox layout v" + std::to_string(MAILBOX_LAYOUT_VERSION) + ")";
}

} // namespace canopy
