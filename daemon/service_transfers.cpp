// buffer.write and buffer.read (docs/control-protocol.md): the checks every transfer shares, the base64 transfers
// of at most 512 KiB, and the copies through a chip that reach a cuda_vmm buffer. A transfer is a step of the
// scheduler over the bytes it touches, so it is ordered with tasks like a task. The attachment transfers are in
// service_attachments.cpp.
#include "daemon/host_window.h"
#include "daemon/request_error.h"
#include "daemon/service.h"
#include "daemon/staged_copy.h"
#include "protocol/base64.h"
#include "worker/worker_loop.h"

#include <atomic>
#include <cstring>
#include <mutex>

namespace canopy::daemon {

namespace {

using nlohmann::json;

constexpr std::uint64_t MAX_READ_CHUNK = 512 * 1024;

std::string encode_data(const std::byte* data, std::uint64_t n) {
    return base64_encode(std::string_view(reinterpret_cast<const char*>(data), static_cast<std::size_t>(n)));
}

// What copies between a staged buffer and a staging buffer: the creator of a CUDA_VMM buffer or rank 0 of a
// symmetric one (whose copy `buffer read` and `buffer write` address), the remote node of a remote host's buffer
// (its link).
std::string transfer_chip(const BufferInfo& info) {
    return info.world.empty() ? info.creator : info.world.front();
}

// buffer.read's "attachment": true asks for the bytes as an attachment; false or absent for base64.
bool wants_attachment(const json& request) {
    const auto it = request.find("attachment");
    if (it == request.end()) {
        return false;
    }
    if (!it->is_boolean()) {
        bad_request("attachment: expected true or false, got " + it->dump());
    }
    return it->get<bool>();
}

} // namespace

std::vector<std::byte> decode_data(const std::string& text) {
    std::string bytes;
    try {
        bytes = base64_decode(text);
    } catch (const Base64Error& e) {
        bad_request(std::string("data: ") + e.what());
    }
    const auto* first = reinterpret_cast<const std::byte*>(bytes.data());
    return std::vector<std::byte>(first, first + bytes.size()); // no memcpy: an empty vector's data() is null
}

void Service::handle_buffer_transfer(const json& request, const Reply& reply, bool write, const Peer& peer,
                                     Attachment attachment) {
    if (write && attachment && request.contains("data")) {
        bad_request("data and attachment exclude each other");
    }
    const bool read_attached = !write && wants_attachment(request);
    const BufferInfo info = live_buffer(request);
    access_.require_owner(peer, info.descriptor.identity, write ? "buffer.write" : "buffer.read",
                          write ? "write the bytes of" : "read the bytes of");
    const std::uint64_t nbytes = info.descriptor.nbytes;
    const std::uint64_t offset = uint_member(request, "offset", "request", 0);
    if (offset > nbytes) {
        bad_request("offset " + std::to_string(offset) + " is past the end of the " + std::to_string(nbytes) +
                    "-byte buffer");
    }
    if (read_attached) {
        // Any count: a read past the end is cut short and says so.
        const std::uint64_t want = uint_member(request, "bytes", "request", nbytes - offset);
        const std::uint64_t length = std::min(want, nbytes - offset);
        read_attachment(info, offset, length, want > length, reply);
        return;
    }
    std::vector<std::byte> data;
    std::uint64_t want = 0;
    if (write) {
        if (!attachment) {
            data = decode_data(string_member(request, "data", "request"));
        }
        const std::uint64_t length = attachment ? attachment->size() : data.size();
        if (length > nbytes - offset) {
            bad_request("writing " + std::to_string(length) + " bytes at offset " + std::to_string(offset) +
                        " runs past the end of the " + std::to_string(nbytes) + "-byte buffer");
        }
        if (attachment && length > 0) {
            write_attachment(info, offset, std::move(attachment), reply);
            return;
        }
    } else {
        want = uint_member(request, "bytes", "request", std::min(nbytes - offset, MAX_READ_CHUNK));
        if (want > MAX_READ_CHUNK) {
            bad_request("bytes: at most " + std::to_string(MAX_READ_CHUNK) + " per request");
        }
        if (want > nbytes - offset) {
            bad_request("reading " + std::to_string(want) + " bytes at offset " + std::to_string(offset) +
                        " runs past the end of the " + std::to_string(nbytes) + "-byte buffer");
        }
    }
    const std::uint64_t length = write ? data.size() : want;
    if (length == 0) {
        reply(write ? json{{"written", 0}} : json{{"data", ""}, {"rest", nbytes - offset}});
        return;
    }
    // The transfer is a task of the scheduler over the bytes it touches: it waits for earlier tasks that
    // write them (or, for a write, read them), and later tasks wait for it.
    schedule_step(
        write ? "buffer.write" : "buffer.read",
        byte_range_views(info.descriptor, offset, length, write ? TensorTag::OUTPUT : TensorTag::INPUT), reply,
        std::string(write ? "buffer write" : "buffer read") + ": the daemon stopped before the transfer ran",
        [this, info, offset, data = std::move(data), length, write](std::uint64_t id, const Reply& once) mutable {
            run_transfer(info, offset, std::move(data), length, write, id, once);
        });
}

void Service::run_transfer(const BufferInfo& info, std::uint64_t offset, std::vector<std::byte> data,
                           std::uint64_t length, bool write, std::uint64_t id, const Reply& reply) {
    const std::uint64_t start = worker::monotonic_ns();
    // The reply goes first, so that the task's on_finish (which answers only a transfer that never ran) finds it
    // answered. A request that arrives in between still orders after the transfer, which is not complete yet.
    auto finish = [this, id, start, reply](ErrorCode code, const std::string& message, json answer) {
        reply(std::move(answer));
        on_result(id, TaskResult{id, code, message, start, worker::monotonic_ns()});
    };
    try {
        if (staged(info)) {
            transfer_through_chip(info, offset, std::move(data), length, write, finish);
            return;
        }
        HostWindow window = map_window(info, supervisor_.registry(), offset, length, write);
        if (write) {
            std::memcpy(window.data, data.data(), data.size());
            finish(ErrorCode::OK, {}, json{{"written", data.size()}});
        } else {
            finish(
                ErrorCode::OK, {},
                json{{"data", encode_data(window.data, length)}, {"rest", info.descriptor.nbytes - offset - length}});
        }
    } catch (const RequestError& e) {
        finish(e.code(), e.what(), error_reply(error_code_name(e.code()), e.what()));
    } catch (const std::exception& e) {
        finish(ErrorCode::BAD_REQUEST, e.what(), error_reply("BAD_REQUEST", e.what()));
    }
}

void Service::transfer_through_chip(const BufferInfo& info, std::uint64_t offset, std::vector<std::byte> data,
                                    std::uint64_t length, bool write, const TransferDone& done) {
    // Device memory is reached only by its chip: bytes travel through a POSIX shm staging buffer, copied by the
    // chip's `copy`. The staging buffer is released once the copy finished.
    BufferRequest staging_request;
    staging_request.nbytes = length;
    const BufferDescriptor staging = supervisor_.create_buffer(staging_request);
    try {
        if (write) {
            HostWindow window =
                map_window(*supervisor_.registry().find(staging.identity), supervisor_.registry(), 0, length, true);
            std::memcpy(window.data, data.data(), data.size());
        }
        const std::uint64_t rest = info.descriptor.nbytes - offset - length;
        copy_through_chip(info, staging, offset, length, write,
                          [this, info, staging, length, rest, write, done](const TaskResult& result) {
                              ErrorCode code = result.code;
                              std::string message = result.message;
                              json answer;
                              try {
                                  if (!result.ok()) {
                                      message = std::string(write ? "buffer write" : "buffer read") + " through " +
                                                transfer_chip(info) + " failed: " + result.message;
                                  } else if (write) {
                                      answer = {{"written", length}};
                                  } else {
                                      HostWindow window = map_window(*supervisor_.registry().find(staging.identity),
                                                                     supervisor_.registry(), 0, length, false);
                                      answer = {{"data", encode_data(window.data, length)}, {"rest", rest}};
                                  }
                              } catch (const std::exception& e) {
                                  code = ErrorCode::BAD_REQUEST;
                                  message = e.what();
                              }
                              (void)supervisor_.release_buffer(staging.identity);
                              done(code, message,
                                   code == ErrorCode::OK ? std::move(answer)
                                                         : error_reply(error_code_name(code), message));
                          });
    } catch (...) {
        (void)supervisor_.release_buffer(staging.identity);
        throw;
    }
}

bool Service::staged(const BufferInfo& info) const {
    const BufferRegistry& registry = const_cast<Supervisor&>(supervisor_).registry();
    if (registry.remote_host(info.descriptor.identity)) {
        return true;
    }
    // A buffer of a remote host lost since the transfer was accepted: its bytes are nowhere this host can reach
    // (its shm object's name may even be one of this host's, where hosts share /dev/shm).
    if (const auto why = registry.stale_reason(info.descriptor.identity)) {
        throw RequestError(ErrorCode::STALE_BUFFER, *why);
    }
    return Backend{info.descriptor.backend} == Backend::CUDA_VMM;
}

void Service::copy_through_chip(const BufferInfo& info, const BufferDescriptor& staging, std::uint64_t offset,
                                std::uint64_t length, bool to_device, std::function<void(const TaskResult&)> done) {
    copy_through(supervisor_, transfer_chip(info), info.descriptor, staging, offset, length, to_device,
                 config_.supervision.task_timeout, std::move(done));
}

} // namespace canopy::daemon
