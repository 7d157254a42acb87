// libFuzzer target: what a level-3 node receives from its L4 on its task stream, on arbitrary bytes: the protobuf
// TaskCalls message, then decode_task_call (daemon/remote_call.h) of each of its calls, where a TaskArgs blob
// becomes Tensors.
//
// Invariants: decode_task_call either throws WireError or RequestError, or returns a request whose tensors each
// pass validate_tensor, whose launch configuration is the call's 32 bytes, and whose arguments encode back to
// a blob that decodes to the same arguments.
#include "daemon/remote_call.h"
#include "protocol/task_args.h"
#include "remote/canopy_remote.pb.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace {

void check_call(const canopy::remote::v1::TaskCall& call) {
    canopy::daemon::TaskRequest request;
    try {
        request = canopy::daemon::decode_task_call(call);
    } catch (const canopy::WireError&) {
        return;
    } catch (const canopy::daemon::RequestError&) {
        return;
    }
    for (const auto& arg : request.args.tensors) {
        canopy::validate_tensor(arg.tensor); // throws, and so crashes the run, if a bad view got through
    }
    if (call.launch().size() != sizeof request.launch ||
        std::memcmp(call.launch().data(), &request.launch, sizeof request.launch) != 0) {
        std::abort();
    }
    const auto again = canopy::decode_task_args(canopy::encode_task_args(request.args));
    if (canopy::encode_task_args(again) != canopy::encode_task_args(request.args)) {
        std::abort();
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    canopy::remote::v1::TaskCalls calls;
    if (!calls.ParseFromArray(data, static_cast<int>(size))) {
        return 0;
    }
    for (const auto& call : calls.calls()) {
        check_call(call);
    }
    return 0;
}
