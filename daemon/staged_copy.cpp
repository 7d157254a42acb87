#include "daemon/staged_copy.h"

#include <algorithm>
#include <memory>
#include <mutex>

namespace canopy::daemon {

void copy_through(Supervisor& supervisor, const std::string& worker, const BufferDescriptor& buffer,
                  const BufferDescriptor& staging, std::uint64_t offset, std::uint64_t length, bool to_buffer,
                  std::chrono::milliseconds timeout, std::function<void(const TaskResult&)> done) {
    struct Copies {
        std::mutex mu;
        std::uint64_t left = 0;
        TaskResult first_failure;
        std::function<void(const TaskResult&)> done;
    };
    auto copies = std::make_shared<Copies>();
    copies->left = (length + STAGED_COPY_BYTES - 1) / STAGED_COPY_BYTES;
    copies->done = std::move(done);
    for (std::uint64_t at = 0; at < length; at += STAGED_COPY_BYTES) {
        const auto count = static_cast<std::uint32_t>(std::min(STAGED_COPY_BYTES, length - at));
        TaskRequest copy;
        copy.kernel = "copy";
        copy.worker = worker;
        const Tensor staged = make_tensor(staging, DataType::UINT8, {count}, {}, at);
        const Tensor far = make_tensor(buffer, DataType::UINT8, {count}, {}, offset + at);
        copy.args.tensors.push_back({to_buffer ? staged : far, TensorTag::INPUT});
        copy.args.tensors.push_back({to_buffer ? far : staged, TensorTag::OUTPUT});
        copy.timeout = timeout;
        // Made here for a transfer step, which a release of the buffer waits for: accepted like a client's task
        // before the release began, and of copy's signature by construction.
        copy.signature_checked = true;
        supervisor.submit(std::move(copy), [copies](TaskResult result) {
            std::unique_lock lock(copies->mu);
            if (!result.ok() && copies->first_failure.ok()) {
                copies->first_failure = result;
            }
            if (--copies->left > 0) {
                return;
            }
            const TaskResult outcome = copies->first_failure.ok() ? result : copies->first_failure;
            lock.unlock();
            copies->done(outcome);
        });
    }
}

} // namespace canopy::daemon
