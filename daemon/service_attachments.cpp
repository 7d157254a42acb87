// buffer.write and buffer.read with the bytes as an attachment on the control socket (docs/control-protocol.md,
// "Attachments"). Each is a step of the scheduler over [offset, offset + N), ordered with tasks like the base64
// transfers:
//   - a write's step reads the attachment from the socket straight into the buffer's pages (posix_shm, sim_vmm,
//     fork_shm), or into a staging posix_shm buffer that the chip's `copy` moves into a cuda_vmm buffer; the step
//     ends when the bytes are in the buffer;
//   - a read's step hands the session a mapping of the range, which it writes after the reply frame; the step ends
//     once the bytes are written (or the connection closed), so no later task changes them while they are sent. A
//     cuda_vmm buffer's bytes are copied to a staging buffer first; that step ends with the copy.
// Staging buffers are created on the slow pool (reserving /dev/shm pages takes about a second per GiB).
#include "daemon/host_window.h"
#include "daemon/service.h"
#include "worker/worker_loop.h"

#include <boost/asio/post.hpp>

namespace canopy::daemon {

namespace {

using nlohmann::json;

// The reply to a read with an attachment: its size, the bytes of the buffer after it, and whether it was cut short
// at the end of the buffer.
json read_answer(std::uint64_t length, std::uint64_t rest, bool cut_short) {
    json answer = {{"attachment", length}, {"rest", rest}};
    if (cut_short) {
        answer["short"] = true;
    }
    return answer;
}

} // namespace

void Service::write_attachment(const BufferInfo& info, std::uint64_t offset, Attachment attachment,
                               const Reply& reply) {
    const std::uint64_t length = attachment->size();
    schedule_step("buffer.write", byte_range_views(info.descriptor, offset, length, TensorTag::OUTPUT), reply,
                  "buffer write: the daemon stopped before the transfer ran",
                  [this, info, offset, attachment](std::uint64_t id, const Reply& once) {
                      const std::uint64_t start = worker::monotonic_ns();
                      // The reply goes first, so that the step's on_finish finds it answered.
                      auto done = [this, id, start, once](ErrorCode code, const std::string& message, json answer) {
                          once(std::move(answer));
                          on_result(id, TaskResult{id, code, message, start, worker::monotonic_ns()});
                      };
                      bool through_host = false;
                      try {
                          through_host = staged(info);
                      } catch (...) {
                          const auto [code, message] = current_error();
                          done(code, message, error_reply(error_code_name(code), message));
                          return;
                      }
                      if (through_host) {
                          receive_staged(info, offset, attachment, done);
                      } else {
                          receive_attachment(info, offset, attachment, done);
                      }
                  });
}

void Service::receive_attachment(const BufferInfo& info, std::uint64_t offset, const Attachment& attachment,
                                 const TransferDone& done) {
    const std::uint64_t length = attachment->size();
    try {
        auto window = std::make_shared<HostWindow>(map_window(info, supervisor_.registry(), offset, length, true));
        attachment->read_into(window->bytes(), [window, length, done](const std::string& error) {
            if (error.empty()) {
                done(ErrorCode::OK, {}, json{{"written", length}});
            } else {
                done(ErrorCode::BAD_REQUEST, "buffer.write: " + error,
                     error_reply("BAD_REQUEST", "buffer.write: " + error));
            }
        });
    } catch (...) {
        attachment->discard();
        const auto [code, message] = current_error();
        done(code, message, error_reply(error_code_name(code), message));
    }
}

void Service::receive_staged(const BufferInfo& info, std::uint64_t offset, const Attachment& attachment,
                             const TransferDone& done) {
    boost::asio::post(slow_, [this, info, offset, attachment, done] {
        const std::uint64_t length = attachment->size();
        std::optional<CanonicalIdentity> staged;
        try {
            BufferRequest request;
            request.nbytes = length;
            const BufferDescriptor staging = supervisor_.create_buffer(request);
            staged = staging.identity;
            auto window = std::make_shared<HostWindow>(
                map_window(*supervisor_.registry().find(staging.identity), supervisor_.registry(), 0, length, true));
            attachment->read_into(window->bytes(), [this, info, offset, staging, window, length,
                                                    done](const std::string& error) mutable {
                window.reset();
                if (!error.empty()) {
                    (void)supervisor_.release_buffer(staging.identity);
                    done(ErrorCode::BAD_REQUEST, "buffer.write: " + error,
                         error_reply("BAD_REQUEST", "buffer.write: " + error));
                    return;
                }
                copy_through_chip(info, staging, offset, length, true,
                                  [this, info, staging, length, done](const TaskResult& result) {
                                      (void)supervisor_.release_buffer(staging.identity);
                                      if (result.ok()) {
                                          done(ErrorCode::OK, {}, json{{"written", length}});
                                          return;
                                      }
                                      const std::string message =
                                          "buffer write through " + info.creator + " failed: " + result.message;
                                      done(result.code, message, error_reply(error_code_name(result.code), message));
                                  });
            });
        } catch (...) {
            attachment->discard();
            if (staged) {
                (void)supervisor_.release_buffer(*staged);
            }
            const auto [code, message] = current_error();
            done(code, message, error_reply(error_code_name(code), message));
        }
    });
}

void Service::read_attachment(const BufferInfo& info, std::uint64_t offset, std::uint64_t length, bool cut_short,
                              const Reply& reply) {
    const std::uint64_t rest = info.descriptor.nbytes - offset - length;
    if (length == 0) {
        reply(read_answer(0, rest, cut_short));
        return;
    }
    schedule_step("buffer.read", byte_range_views(info.descriptor, offset, length, TensorTag::INPUT), reply,
                  "buffer read: the daemon stopped before the transfer ran",
                  [this, info, offset, length, answer = read_answer(length, rest, cut_short)](std::uint64_t id,
                                                                                              const Reply& once) {
                      const std::uint64_t start = worker::monotonic_ns();
                      try {
                          if (staged(info)) {
                              send_staged(info, offset, length, answer, id, start, once);
                              return;
                          }
                          auto window = std::make_shared<HostWindow>(
                              map_window(info, supervisor_.registry(), offset, length, false));
                          // The step ends once the bytes are written to the client, or its connection closed first: no
                          // later task writes them meanwhile. Either way it succeeded: a reader that went away fails no
                          // task.
                          auto bytes = std::make_shared<OutboundAttachment>(
                              window->bytes(), window, [this, alive = alive_, id, start](bool) {
                                  if (*alive) {
                                      on_result(id, TaskResult{id, ErrorCode::OK, {}, start, worker::monotonic_ns()});
                                  }
                              });
                          Response response(answer);
                          once(std::move(response.attach_bytes(std::move(bytes))));
                      } catch (...) {
                          const auto [code, message] = current_error();
                          once(error_reply(error_code_name(code), message));
                          on_result(id, TaskResult{id, code, message, start, worker::monotonic_ns()});
                      }
                  });
}

void Service::send_staged(const BufferInfo& info, std::uint64_t offset, std::uint64_t length, json answer,
                          std::uint64_t id, std::uint64_t start, const Reply& reply) {
    auto fail = [this, id, start, reply](ErrorCode code, const std::string& message) {
        reply(error_reply(error_code_name(code), message));
        on_result(id, TaskResult{id, code, message, start, worker::monotonic_ns()});
    };
    boost::asio::post(slow_, [this, info, offset, length, answer, id, start, reply, fail] {
        BufferDescriptor staging;
        try {
            BufferRequest request;
            request.nbytes = length;
            staging = supervisor_.create_buffer(request);
        } catch (...) {
            const auto [code, message] = current_error();
            fail(code, message);
            return;
        }
        copy_through_chip(info, staging, offset, length, false, [=, this](const TaskResult& result) {
            if (!result.ok()) {
                (void)supervisor_.release_buffer(staging.identity);
                fail(result.code, "buffer read through " + info.creator + " failed: " + result.message);
                return;
            }
            try {
                auto window = std::make_shared<HostWindow>(map_window(*supervisor_.registry().find(staging.identity),
                                                                      supervisor_.registry(), 0, length, false));
                // The staging buffer holds the bytes as they were when the step ran: the step ends now, and the
                // staging buffer goes once its bytes are sent.
                auto bytes = std::make_shared<OutboundAttachment>(
                    window->bytes(), window, [this, alive = alive_, staged = staging.identity](bool) {
                        if (*alive) {
                            (void)supervisor_.release_buffer(staged);
                        }
                    });
                Response response(answer);
                reply(std::move(response.attach_bytes(std::move(bytes))));
                on_result(id, TaskResult{id, ErrorCode::OK, {}, start, worker::monotonic_ns()});
            } catch (...) {
                (void)supervisor_.release_buffer(staging.identity);
                const auto [code, message] = current_error();
                fail(code, message);
            }
        });
    });
}

} // namespace canopy::daemon
