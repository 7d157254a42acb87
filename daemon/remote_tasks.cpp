#include "daemon/remote_tasks.h"

#include "daemon/remote_credentials.h"
#include "daemon/remote_session_streams.h"
#include "remote/canopy_remote.grpc.pb.h"

#include <atomic>
#include <grpcpp/grpcpp.h>

namespace canopy::daemon {
namespace pb = canopy::remote::v1;

struct RemoteTasks::Impl {
    std::atomic<bool> closing{false}; // the destructor cancels the stream: its end is no news
    std::uint64_t session = 0;
    std::shared_ptr<grpc::Channel> channel;
    std::unique_ptr<pb::Node::Stub> stub;
    std::unique_ptr<SessionStreams> streams; // last: destroyed first, while the stub lives
};

RemoteTasks::RemoteTasks(const config::RemoteConfig& remote, std::string host, std::uint64_t session,
                         OnReplies on_replies, OnEnd on_end)
    : impl_(std::make_unique<Impl>()) {
    impl_->session = session;
    impl_->channel = grpc::CreateCustomChannel(config::to_string(remote.address), channel_credentials(remote.tls),
                                               channel_arguments(remote));
    impl_->stub = pb::Node::NewStub(impl_->channel);
    impl_->streams = std::make_unique<SessionStreams>(
        *impl_->stub,
        [host = std::move(host), on_replies = std::move(on_replies)](const pb::TaskReplies& replies) {
            std::vector<RemoteReply> out;
            out.reserve(static_cast<std::size_t>(replies.replies_size()));
            for (const pb::TaskReply& r : replies.replies()) {
                RemoteReply& reply = out.emplace_back();
                reply.call_id = r.call_id();
                if (r.code() > ERROR_CODE_MAX) {
                    reply.code = ErrorCode::KERNEL_FAILED;
                    reply.message = host + " answered with unknown error code " + std::to_string(r.code());
                    continue;
                }
                reply.code = static_cast<ErrorCode>(r.code());
                reply.message = r.message();
                reply.start_ns = r.start_ns();
                reply.end_ns = r.end_ns();
            }
            on_replies(out);
        },
        [impl = impl_.get(), on_end = std::move(on_end)](const std::string& which, const grpc::Status& status) {
            if (!impl->closing) {
                on_end("its " + which + " ended (" + describe_status(status) + ")");
            }
        });
}

RemoteTasks::~RemoteTasks() {
    impl_->closing = true;
    impl_->streams.reset(); // cancels the stream and waits for its end
}

void RemoteTasks::send(const RemoteCall& call) {
    pb::TaskCall out;
    out.set_session(impl_->session);
    out.set_call_id(call.call_id);
    out.set_kernel(call.kernel);
    out.set_worker(call.worker);
    out.set_args(reinterpret_cast<const char*>(call.args.data()), call.args.size());
    out.set_launch(reinterpret_cast<const char*>(&call.launch), sizeof call.launch);
    out.set_timeout_ms(call.timeout_ms);
    out.set_task_id(call.task_id);
    impl_->streams->send(std::move(out));
}

} // namespace canopy::daemon
