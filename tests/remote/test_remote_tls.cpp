// Mutual TLS between an L4 and its remote node, over loopback: the right certificates work, and a certificate
// from another CA, a name that does not match on either side, and plain TCP are each refused with a reason
// that names it.
#include "remote/canopy_remote.grpc.pb.h"
#include "tests/remote/hosts.h"
#include "tests/remote/remote_fixture.h"

#include <catch2/catch.hpp>
#include <grpcpp/grpcpp.h>
#include <thread>

using namespace canopy::e2e;
using nlohmann::json;

TEST_CASE("with mutual TLS an L4 runs tasks on its remote node", "[remote][tls]") {
    TestCa ca;
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), ca.tls("hb", "rack")));
    Daemon rack(l4_config({remote_node("hb", loopback(port), ca.tls("rack", "hb"))}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:1", "--wait"}).at("state") ==
          "completed");
    CHECK(
        has_log_line(hb, {"serving a remote L4 on 127.0.0.1:" + std::to_string(port), "mutual TLS", "peer name rack"}));
}

TEST_CASE("an L4 with a certificate of another CA, a wrong name on either side, or plain TCP is refused with the "
          "reason",
          "[remote][tls]") {
    TestCa ca;
    TestCa other;
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), ca.tls("hb", "rack")));
    const auto refused = [&](const json& tls, const std::string& part) {
        Daemon rack(l4_config({remote_node("hb", loopback(port), tls, 500)}));
        const std::string why = eventually_last_exit(rack, "/hb", part);
        std::this_thread::sleep_for(std::chrono::milliseconds(500)); // a few more attempts
        INFO(why);
        CHECK_THAT(why, Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) + " lost"));
        CHECK_THAT(why, Catch::Contains(part));
        const Output o = rack.cli({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait", "--json"});
        CHECK(error_code_of(o.json()) == "WORKER_DIED");
        // The L4 itself serves on.
        CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
              "completed");
    };
    SECTION("the L4 trusts another CA and presents its certificate") {
        refused(other.tls("rack", "hb"), "no session could be opened (UNAVAILABLE");
    }
    SECTION("the node's certificate does not carry the name the L4 expects") {
        refused(ca.tls("rack", "hx"), "no session could be opened (UNAVAILABLE");
    }
    SECTION("the L4's certificate does not carry the name the node expects") {
        refused(ca.tls("intruder", "hb"),
                "no session could be opened (UNAUTHENTICATED: the peer's certificate names intruder, expected rack)");
        // The L4 keeps trying; the node says so at warning once.
        CHECK(count_log_lines(hb, {"refused an L4 session from", "names intruder, expected rack"}) >= 2);
        CHECK(count_log_lines(hb, {"warning refused an L4 session from", "names intruder, expected rack"}) == 1);
        // A call of another method with that certificate is refused and logged too, not only the session.
        const TestCa::Files intruder = ca.issue("intruder");
        grpc::SslCredentialsOptions ssl;
        ssl.pem_root_certs = read_file(ca.ca_file());
        ssl.pem_cert_chain = read_file(intruder.cert);
        ssl.pem_private_key = read_file(intruder.key);
        grpc::ChannelArguments args;
        args.SetSslTargetNameOverride("hb");
        const auto channel = grpc::CreateCustomChannel(loopback(port), grpc::SslCredentials(ssl), args);
        const auto node = canopy::remote::v1::Node::NewStub(channel); // the generated gRPC client of hb
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
        canopy::remote::v1::TaskCall call;
        canopy::remote::v1::TaskReply reply;
        const grpc::Status status = node->Echo(&context, call, &reply);
        CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
        CHECK(status.error_message() == "the peer's certificate names intruder, expected rack");
        CHECK(eventually_logged(hb, {"refused a call of Echo from", "names intruder, expected rack"}));
    }
    SECTION("the L4's certificate carries the name the node expects only as an email address") {
        const TestCa::Files mail = ca.issue("mail-rack", "email:rack");
        refused({{"ca", ca.ca_file()}, {"cert", mail.cert}, {"key", mail.key}, {"peer_name", "hb"}},
                "no session could be opened (UNAUTHENTICATED: the peer's certificate has no DNS name among its subject "
                "alternative names (rack), expected rack)");
    }
    SECTION("the L4 speaks plain TCP") {
        refused("insecure", "no session could be opened (UNAVAILABLE");
    }
    // None of these became the node's session.
    CHECK_FALSE(has_log_line(hb, {"attached from"}));
}

TEST_CASE("a node refuses to start when a file of its TLS configuration cannot be read, naming the file",
          "[remote][tls]") {
    const std::uint16_t port = free_tcp_port();
    TempDir dir;
    const json tls = {{"ca", (dir.path / "missing-ca.pem").string()},
                      {"cert", (dir.path / "hb.pem").string()},
                      {"key", (dir.path / "hb.key").string()},
                      {"peer_name", "rack"}};
    REQUIRE_THROWS_WITH(Daemon(l3_config("hb", loopback(port), tls)),
                        Catch::Contains("cannot read the CA certificate " + (dir.path / "missing-ca.pem").string()));
    // A directory, which would read as empty, and a file far larger than a PEM file is.
    TestCa ca;
    json wrong = ca.tls("hb", "rack");
    wrong["key"] = dir.path.string();
    REQUIRE_THROWS_WITH(Daemon(l3_config("hb", loopback(port), wrong)),
                        Catch::Contains("the private key " + dir.path.string() + " is not a regular file"));
    // A readable file that is not the key: the node stops before it starts its workers, naming the files.
    wrong["key"] = wrong["cert"];
    REQUIRE_THROWS_WITH(Daemon(l3_config("hb", loopback(port), wrong)),
                        Catch::Contains("cannot serve remote L4s with the certificate " +
                                        wrong["cert"].get<std::string>() + ", the private key " +
                                        wrong["cert"].get<std::string>()) &&
                            Catch::Contains("TLS refused them"));
    const std::string big = write_file(dir.path, "big.pem", std::string((1 << 20) + 1, 'x'));
    wrong["key"] = big;
    REQUIRE_THROWS_WITH(
        Daemon(l3_config("hb", loopback(port), wrong)),
        Catch::Contains("the private key " + big + " is 1048577 bytes, more than a PEM file of 1048576 holds"));
}
