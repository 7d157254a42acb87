// libFuzzer target: the control socket's task decoder (daemon/json_codec.cpp) on arbitrary bytes, the
// boundary where a client's JSON becomes Tensors. Any ID that parses as an identity resolves to one valid
// 4096-byte posix_shm buffer, so the fuzzer reaches the views themselves. Invariants: parse_task either
// throws RequestError, or returns tensors that each pass validate_tensor and fit their buffer.
#include "daemon/json_codec.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>

namespace {

canopy::BufferDescriptor resolve(const std::string& id, const std::string& where) {
    canopy::CanonicalIdentity identity{};
    try {
        identity = canopy::parse_identity(id);
    } catch (const canopy::WireError&) {
        throw canopy::daemon::RequestError(canopy::ErrorCode::UNKNOWN_BUFFER, where + ": no buffer");
    }
    return canopy::make_posix_shm_descriptor(identity, 4096, canopy::Access::READWRITE, "cnpyfuzz");
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const auto request = nlohmann::json::parse(data, data + size, nullptr, false);
    if (request.is_discarded()) {
        return 0;
    }
    try {
        const auto parsed = canopy::daemon::parse_task(request, resolve, "task");
        for (const auto& arg : parsed.request.args.tensors) {
            canopy::validate_tensor(arg.tensor); // must not throw: parse_task ran the gate
            if (arg.tensor.byte_offset + canopy::tensor_extent_bytes(arg.tensor) > arg.tensor.buffer.nbytes) {
                std::abort();
            }
        }
    } catch (const canopy::daemon::RequestError&) {
    }
    return 0;
}
