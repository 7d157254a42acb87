#include "scheduler/checks.h"

#include "protocol/error.h"
#include "protocol/overlap.h"

#include <string>

namespace canopy::scheduler {
namespace {

std::string arg_name(std::size_t i) {
    return "args[" + std::to_string(i) + "]";
}

} // namespace

void check_access(std::span<const TensorArg> args) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        const TensorArg& arg = args[i];
        if (!is_valid(arg.tag)) {
            throw WireError(ErrorCode::INVALID_TENSOR, arg_name(i) + ".tag",
                            "unknown tag " + std::to_string(static_cast<unsigned>(arg.tag)));
        }
        const Access granted = arg.tensor.buffer.access;
        const char* missing = nullptr;
        if (tag_reads(arg.tag) && !grants_read(granted)) {
            missing = "read";
        } else if (tag_writes(arg.tag) && !grants_write(granted)) {
            missing = "write";
        }
        if (missing != nullptr) {
            throw WireError(ErrorCode::ACCESS_DENIED, arg_name(i),
                            std::string(to_string(arg.tag)) + " needs " + missing + " access; the buffer grants " +
                                to_string(granted));
        }
    }
}

void check_no_overlapping_writes(std::span<const TensorArg> args) {
    for (std::size_t j = 1; j < args.size(); ++j) {
        for (std::size_t i = 0; i < j; ++i) {
            if (!tag_writes(args[i].tag) && !tag_writes(args[j].tag)) {
                continue;
            }
            const Overlap overlap = tensor_overlap(args[j].tensor, args[i].tensor);
            if (overlap != Overlap::NONE) {
                throw WireError(ErrorCode::OVERLAPPING_WRITES, arg_name(j),
                                std::string(to_string(args[j].tag)) + " overlaps " + arg_name(i) + " (" +
                                    to_string(args[i].tag) + ") of the same buffer (" + to_string(overlap) + ")");
            }
        }
    }
}

} // namespace canopy::scheduler
