// What a remote host says of itself on its session, as an L4 reads it: its Hello and its worker tree. A host whose
// Hello is refused, whose tree the L4 cannot read or is not a level-3 node's, whose tree is larger than a status
// report holds, or that sends a message larger than the L4 takes from a node, is lost with the reason in the L4's
// status and log, and the L4 keeps serving. The host is a fake node in this process (a gRPC server on loopback)
// that sends the events it is given.
#include "daemon/remote_call.h"
#include "daemon/remote_server.h"
#include "remote/canopy_remote.grpc.pb.h"
#include "tests/remote/remote_fixture.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>

using namespace canopy::e2e;
using nlohmann::json;
namespace pb = canopy::remote::v1;

namespace {

// Sends `events` on the session stream, which then stays open without heartbeats until the L4 ends it; a Tasks
// stream is read and never answered; a module call is answered OK, naming `module_chips` as the chips that loaded
// it.
class FakeNodeService final : public pb::Node::CallbackService {
public:
    explicit FakeNodeService(std::vector<pb::NodeEvent> events, std::vector<std::string> module_chips = {},
                             bool unreadable_replies = false)
        : events_(std::move(events)), module_chips_(std::move(module_chips)), unreadable_replies_(unreadable_replies) {}

    grpc::ServerWriteReactor<pb::NodeEvent>* Attach(grpc::CallbackServerContext* /*context*/,
                                                    const pb::AttachRequest* /*request*/) override {
        return new Events(events_);
    }

    grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies>* Tasks(grpc::CallbackServerContext* /*context*/) override {
        if (unreadable_replies_) {
            return new Unreadable;
        }
        return new Drain;
    }

    grpc::ServerUnaryReactor* Module(grpc::CallbackServerContext* context, const pb::ModuleCall* /*request*/,
                                     pb::ModuleReply* reply) override {
        reply->set_code(0);
        for (const std::string& chip : module_chips_) {
            reply->add_chips(chip);
        }
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        reactor->Finish(grpc::Status::OK);
        return reactor;
    }

private:
    class Events final : public grpc::ServerWriteReactor<pb::NodeEvent> {
    public:
        explicit Events(std::vector<pb::NodeEvent> events) : events_(std::move(events)) {
            if (!events_.empty()) {
                StartWrite(&events_[0]);
            }
        }
        void OnWriteDone(bool ok) override {
            if (!ok) {
                end();
            } else if (++sent_ < events_.size()) {
                StartWrite(&events_[sent_]);
            }
        }
        void OnCancel() override { end(); }
        void OnDone() override { delete this; }

    private:
        void end() {
            if (!ended_.exchange(true)) {
                Finish(grpc::Status::CANCELLED);
            }
        }
        std::vector<pb::NodeEvent> events_;
        std::size_t sent_ = 0;
        std::atomic<bool> ended_{false};
    };

    class Drain final : public grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies> {
    public:
        Drain() { StartRead(&in_); }
        void OnReadDone(bool ok) override {
            if (ok) {
                StartRead(&in_);
            } else {
                end();
            }
        }
        void OnCancel() override { end(); }
        void OnDone() override { delete this; }

    private:
        void end() {
            if (!ended_.exchange(true)) {
                Finish(grpc::Status::OK);
            }
        }
        pb::TaskCalls in_;
        std::atomic<bool> ended_{false};
    };

    // Answers every call with a reply whose message is the byte 0xff, which protobuf writes (logging it) and the
    // L4's parse refuses: a string field must be UTF-8.
    class Unreadable final : public grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies> {
    public:
        Unreadable() { StartRead(&in_); }
        void OnReadDone(bool ok) override {
            if (!ok) {
                end();
                return;
            }
            out_.clear_replies();
            for (const pb::TaskCall& call : in_.calls()) {
                pb::TaskReply* reply = out_.add_replies();
                reply->set_call_id(call.call_id());
                reply->set_message("\xff");
            }
            StartWrite(&out_);
        }
        void OnWriteDone(bool ok) override {
            if (ok) {
                StartRead(&in_);
            } else {
                end();
            }
        }
        void OnCancel() override { end(); }
        void OnDone() override { delete this; }

    private:
        void end() {
            if (!ended_.exchange(true)) {
                Finish(grpc::Status::OK);
            }
        }
        pb::TaskCalls in_;
        pb::TaskReplies out_;
        std::atomic<bool> ended_{false};
    };

    std::vector<pb::NodeEvent> events_;
    std::vector<std::string> module_chips_;
    bool unreadable_replies_ = false;
};

pb::NodeEvent hello_event() {
    pb::NodeEvent event;
    pb::Hello* hello = event.mutable_hello();
    hello->set_name("hb");
    hello->set_owner_instance(std::string(16, 'z'));
    hello->set_session(1);
    hello->set_protocol(canopy::daemon::REMOTE_PROTOCOL);
    hello->set_pid(1);
    return event;
}

pb::NodeEvent tree_event(const std::string& tree) {
    pb::NodeEvent event;
    event.set_status(tree);
    return event;
}

struct FakeNode {
    explicit FakeNode(std::vector<pb::NodeEvent> events, std::vector<std::string> module_chips = {},
                      bool unreadable_replies = false)
        : service(std::move(events), std::move(module_chips), unreadable_replies) {
        grpc::ServerBuilder builder;
        builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
        builder.RegisterService(&service);
        server = builder.BuildAndStart();
        REQUIRE(server);
        REQUIRE(port > 0);
    }
    ~FakeNode() { server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1)); }
    FakeNode(const FakeNode&) = delete;
    FakeNode& operator=(const FakeNode&) = delete;

    FakeNodeService service;
    int port = 0;
    std::unique_ptr<grpc::Server> server;
};

json tree_worker(const std::string& path, const json& extra = json::object()) {
    json w = {{"path", path}, {"kind", "sub"}, {"state", "running"}, {"pid", 77}};
    w.update(extra);
    return w;
}

// The L4's reason for losing hb after hb sent `events`, once it holds `part`; the L4's own sub still runs a task.
std::string lost_because(std::vector<pb::NodeEvent> events, const std::string& part) {
    FakeNode node(std::move(events));
    Daemon rack(l4_config({remote_node("hb", loopback(static_cast<std::uint16_t>(node.port)), "insecure", 5000)}));
    const std::string why = eventually_last_exit(rack, "/hb", part);
    CHECK(eventually_logged(rack, {"hb", part}));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    return why;
}

} // namespace

TEST_CASE("an L4 shows the workers a remote host reports", "[remote][tree]") {
    FakeNode node({hello_event(),
                   tree_event(json::array({tree_worker("/sub0"), tree_worker("/sub1", {{"state", "dead"}})}).dump())});
    Daemon rack(l4_config({remote_node("hb", loopback(static_cast<std::uint16_t>(node.port)), "insecure", 5000)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    RawClient c(rack.socket());
    const json workers = c.request({{"op", "status"}}).at("workers");
    bool dead_seen = false;
    for (const json& w : workers) {
        if (w.at("path") == "/hb/sub1") {
            dead_seen = w.at("state") == "dead";
        }
    }
    CHECK(dead_seen);
}

TEST_CASE("a remote host whose task reply the L4 cannot parse is lost, naming it, and the task fails",
          "[remote][tree]") {
    // The fake node sends no heartbeats: a lost_after of a minute leaves the reply's refusal as the only reason.
    FakeNode node({hello_event(), tree_event(json::array({tree_worker("/sub0")}).dump())}, {}, true);
    Daemon rack(l4_config({remote_node("hb", loopback(static_cast<std::uint16_t>(node.port)), "insecure", 60000)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const auto sent = std::chrono::steady_clock::now();
    const json task = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0"});
    const json failed = rack.cli_json({"wait", task.at("id").dump()});
    CHECK(std::chrono::steady_clock::now() - sent < std::chrono::seconds(20));
    CHECK(failed.at("error").at("code") == "WORKER_DIED");
    const std::string why = failed.at("error").at("message").get<std::string>();
    INFO(why);
    CHECK_THAT(why,
               Catch::Contains("host hb at 127.0.0.1:" + std::to_string(node.port) +
                               " lost: its task stream ended (DATA_LOSS: a reply from the node could not be read"));
    CHECK(has_log_line(rack, {"worker /hb", "could not be read"}));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a remote host whose worker tree the L4 cannot read is lost, naming the field", "[remote][tree]") {
    const std::string part = "its worker tree is unreadable: [1].pid: 1e+300 is out of range for int64";
    const std::string why = lost_because(
        {hello_event(), tree_event(json::array({tree_worker("/sub0"), tree_worker("/sub1", {{"pid", 1e300}})}).dump())},
        part);
    INFO(why);
    CHECK_THAT(why, Catch::Contains("host hb at 127.0.0.1:"));
    CHECK_THAT(why, Catch::Contains(part));
    CHECK_THAT(lost_because({hello_event(), tree_event("[{\"path\": \"/sub0\", \"state\": \"running\"")},
                            "its worker tree is unreadable: not JSON"),
               Catch::Contains("lost: its worker tree is unreadable: not JSON"));
}

TEST_CASE("a remote host whose tree holds a path no level-3 node has, or a path twice, is lost, naming it",
          "[remote][tree]") {
    CHECK_THAT(lost_because({hello_event(),
                             tree_event(json::array({tree_worker("/sub0"), tree_worker("/sub0/../chip0")}).dump())},
                            R"(its worker tree is not a level-3 node's: [1].path: "/sub0/../chip0" is not a chip)"),
               Catch::Contains("host hb at 127.0.0.1:"));
    CHECK_THAT(
        lost_because({hello_event(), tree_event(json::array({tree_worker("/sub0"), tree_worker("/sub0")}).dump())},
                     R"(its worker tree is not a level-3 node's: [1].path: "/sub0" is given twice (also at [0]))"),
        Catch::Contains("host hb at 127.0.0.1:"));
}

TEST_CASE("a remote host whose worker tree is larger than a status report holds is lost, naming the sizes",
          "[remote][tree]") {
    json tree = json::array();
    for (int i = 0; i < 400; ++i) {
        tree.push_back(tree_worker("/sub" + std::to_string(i), {{"last_exit", std::string(200, 'x')}}));
    }
    const std::string why =
        lost_because({hello_event(), tree_event(tree.dump())}, "its worker tree of 400 workers takes");
    INFO(why);
    CHECK_THAT(why, Catch::Contains("bytes, more than a status report holds (65"));
}

TEST_CASE("a remote host whose Hello is refused, or that sends a second one, is lost, saying why", "[remote][tree]") {
    pb::NodeEvent zero = hello_event();
    zero.mutable_hello()->set_owner_instance(std::string(16, '\0'));
    CHECK_THAT(lost_because({zero}, "its hello holds an all-zero buffer owner nonce"),
               Catch::Contains("lost: its hello holds an all-zero buffer owner nonce"));
    pb::NodeEvent old = hello_event();
    old.mutable_hello()->set_protocol(1);
    CHECK_THAT(lost_because({old}, "its hello speaks remote protocol 1, this L4 2"),
               Catch::Contains("lost: its hello speaks remote protocol 1, this L4 2"));
    CHECK_THAT(lost_because({hello_event(), hello_event()}, "it sent a second hello in session 1"),
               Catch::Contains("lost: it sent a second hello in session 1"));
}

TEST_CASE("a remote host that sends a message larger than an L4 takes from a node is lost, naming the sizes",
          "[remote][tree]") {
    // A tree of exactly the limit's bytes makes a message 5 bytes over it, with the field's tag and length.
    const std::string why =
        lost_because({hello_event(), tree_event(std::string(canopy::daemon::MAX_NODE_MESSAGE_BYTES, ' '))},
                     "its session ended (RESOURCE_EXHAUSTED");
    INFO(why);
    CHECK_THAT(why, Catch::Contains("larger than max"));
    CHECK_THAT(why, Catch::Contains(std::to_string(canopy::daemon::MAX_NODE_MESSAGE_BYTES) + ")"));
}

TEST_CASE("a module load that a remote host answers naming a chip it does not have fails, naming what it sent",
          "[remote][tree]") {
    FakeNode node({hello_event(), tree_event(json::array({tree_worker("/sub0")}).dump())},
                  {"/chip0", "/chip0\n/../sub1"});
    Daemon rack(l4_config({remote_node("hb", loopback(static_cast<std::uint16_t>(node.port)), "insecure", 5000)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    TempDir files;
    const Output o =
        rack.cli({"module", "load", "m", write_file(files.path, "k.ptx", ".version 8.0\n.target sm_90\n"), "--json"});
    CHECK(o.rc == 1);
    CHECK(error_code_of(o.json()) == "KERNEL_FAILED");
    CHECK_THAT(error_message_of(o.json()),
               Catch::Contains(R"(named a chip "/chip0\u000a/../sub1" that is not one of a level-3 node's (/chipN))"));
    CHECK(rack.cli_json({"module", "list"}).at("modules") == json::array());
}
