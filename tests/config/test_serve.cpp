// The "serve" section of a level-3 node, the rule for insecure tls, and how remote nodes and serve are written
// back and described.

#include "remote_test_util.h"

using namespace canopy::config;
using namespace canopy::config::testing;

TEST_CASE("insecure tls is accepted on every loopback address", "[config]") {
    for (const char* address : {"localhost:7471", "127.0.0.1:7471", "127.255.0.9:1", "[::1]:7471"}) {
        INFO(address);
        const Config config = parse_config(l4(remote(address, R"("insecure")")));
        CHECK(config.node.nodes[0].remote->tls == TlsConfig{true, {}, {}, {}, {}});
    }
    const Config served_config = parse_config(served(serve_at("127.0.0.1:7471", R"("insecure")")));
    REQUIRE(served_config.serve.has_value());
    CHECK(served_config.serve->tls.insecure);
}

TEST_CASE("insecure tls on an address that is not loopback is refused at that tls field", "[config]") {
    const std::string message = R"("tls": "insecure" needs a loopback address or "testing": {"insecure_peers": true}, )"
                                R"(got )";
    require_all_rejected({
        {"private IPv4", l4(remote("10.0.0.2:7471", R"("insecure")")), "/node/nodes/0/tls", message + "10.0.0.2"},
        {"host name", l4(remote("hb:7471", R"("insecure")")), "/node/nodes/0/tls", message + "hb"},
        {"upper-case localhost", l4(remote("LOCALHOST:7471", R"("insecure")")), "/node/nodes/0/tls",
         message + "LOCALHOST"},
        {"IPv6", l4(remote("[fd00::2]:7471", R"("insecure")")), "/node/nodes/0/tls", message + "fd00::2"},
        {"IPv4-mapped loopback", l4(remote("[::ffff:127.0.0.1]:7471", R"("insecure")")), "/node/nodes/0/tls",
         message + "::ffff:127.0.0.1"},
        {"second node",
         l4(remote("127.0.0.1:1", R"("insecure")", "", "a") + ", " + remote("10.0.0.3:1", R"("insecure")")),
         "/node/nodes/1/tls", message + "10.0.0.3"},
        {"serve on any address", served(serve_at("0.0.0.0:7471", R"("insecure")")), "/serve/tls", message + "0.0.0.0"},
        {"insecure_peers false",
         l4(remote("10.0.0.2:7471", R"("insecure")"), R"("testing": {"insecure_peers": false})"), "/node/nodes/0/tls",
         message + "10.0.0.2"},
    });
}

TEST_CASE("testing.insecure_peers allows insecure tls anywhere, whether testing comes before or after", "[config]") {
    const std::string node = R"("node": {"level": 4, "nodes": [)" + remote("10.0.0.2:7471", R"("insecure")") + "]}";
    const std::string testing = R"("testing": {"insecure_peers": true})";
    for (const std::string& document : {"{" + node + ", " + testing + "}", "{" + testing + ", " + node + "}"}) {
        INFO(document);
        const Config config = parse_config(document);
        CHECK(config.testing.insecure_peers);
        CHECK(config.node.nodes[0].remote->tls.insecure);
    }
    const Config config = parse_config(served(serve_at("0.0.0.0:7471", R"("insecure")"), testing));
    CHECK(config.serve->tls.insecure);
    CHECK(config.serve->listen == NetAddress{"0.0.0.0", 7471});
    require_rejected(served(serve_at("0.0.0.0:1"), R"("testing": {"insecure_peers": "yes"})"),
                     "/testing/insecure_peers", R"(expected a boolean, got string "yes")");
    CHECK_FALSE(parse_config(served(serve_at("0.0.0.0:1"))).testing.insecure_peers);
}

TEST_CASE("serve on a level-3 node is read with its address, tls and loss timeout", "[config]") {
    const Config config =
        parse_config(served(R"({"listen": "[::]:7471", "tls": )" + SERVE_TLS + R"(, "lost_after_ms": 250})"));
    REQUIRE(config.serve.has_value());
    CHECK(config.serve->listen == NetAddress{"::", 7471});
    CHECK(config.serve->tls == TlsConfig{false, "/ca.pem", "/hb.pem", "/hb.key", "rack"});
    CHECK(config.serve->lost_after == std::chrono::milliseconds(250));
    CHECK(parse_config(served(serve_at("hb.rack:7471"))).serve->lost_after == std::chrono::milliseconds(3000));
    CHECK_FALSE(parse_config(with_node(L3)).serve.has_value());
}

TEST_CASE("serve needs listen and tls and takes only listen, tls and lost_after_ms", "[config]") {
    require_all_rejected({
        {"not an object", served(R"("0.0.0.0:7471")"), "/serve", R"(expected an object, got string "0.0.0.0:7471")"},
        {"no listen", served(R"({"tls": )" + SERVE_TLS + "}"), "/serve/listen", R"(missing required key "listen")"},
        {"no tls", served(R"({"listen": "0.0.0.0:7471"})"), "/serve/tls", R"(missing required key "tls")"},
        {"unknown key", served(R"({"listen": "0.0.0.0:7471", "tls": "insecure", "peers": 1})"), "/serve/peers",
         R"(unknown key "peers")"},
        {"listen port 0", served(serve_at("0.0.0.0:0")), "/serve/listen", "port must be 1..65535, got 0"},
        {"listen IPv6 without brackets", served(serve_at("fd00::1:7471")), "/serve/listen",
         "expected an IPv6 host in brackets"},
        {"tls peer_name",
         served(serve_at("0.0.0.0:1", R"({"ca": "/a", "cert": "/b", "key": "/c", "peer_name": "r k"})")),
         "/serve/tls/peer_name", R"(got "r k")"},
        {"lost_after_ms below", served(R"({"listen": "0.0.0.0:1", "tls": )" + SERVE_TLS + R"(, "lost_after_ms": 0})"),
         "/serve/lost_after_ms", "expected an integer from 100 to 600000, got 0"},
        {"lost_after_ms above",
         served(R"({"listen": "0.0.0.0:1", "tls": )" + SERVE_TLS + R"(, "lost_after_ms": 600001})"),
         "/serve/lost_after_ms", "expected an integer from 100 to 600000, got 600001"},
    });
}

TEST_CASE("serve on a level-4 node is refused at /serve before its contents are read", "[config]") {
    const std::string message = R"(a level-4 node is not served to another; "serve" needs a level-3 node, got level 4)";
    require_all_rejected({
        {"well-formed serve", l4(remote("hb:1"), R"("serve": )" + serve_at("0.0.0.0:7471")), "/serve", message},
        {"malformed serve", l4(remote("hb:1"), R"("serve": {"bogus": 1})"), "/serve", message},
    });
}

TEST_CASE("remote nodes, serve and insecure_peers survive a round trip through to_json", "[config]") {
    check_round_trip(parse_config(l4(L3 + ", " + remote("10.0.0.2:7471", TLS, R"(, "lost_after_ms": 100)", "h2") +
                                         ", " + remote("[fd00::3]:1", R"("insecure")", "", "h3"),
                                     R"("testing": {"insecure_peers": true, "fault_kernels": true})")));
    check_round_trip(
        parse_config(served(R"({"listen": "[::]:7471", "tls": )" + SERVE_TLS + R"(, "lost_after_ms": 600000})")));
    check_round_trip(parse_config(served(serve_at("localhost:9", R"("insecure")"))));
    for (const char* name : {"l4-remote.json", "l3-serve.json"}) {
        INFO(name);
        check_round_trip(load_config(EXAMPLES / name));
    }
    const nlohmann::json node = to_json(parse_config(l4(remote("hb:1"))))["node"]["nodes"][0];
    CHECK(node ==
          nlohmann::json::parse(R"({"name": "hb", "remote": "hb:1", "lost_after_ms": 3000, "tls": )" + TLS + "}"));
    CHECK_FALSE(to_json(parse_config(with_node(L3))).contains("serve"));
}

TEST_CASE("worker_paths lists a remote node by its own path alone", "[config]") {
    const Config config = load_config(EXAMPLES / "l4-remote.json");
    CHECK(worker_paths(config.node) ==
          std::vector<std::string>{"/sub0", "/ha", "/ha/chip0", "/ha/chip1", "/ha/sub0", "/ha/sub1", "/hb"});
}

TEST_CASE("describe shows a remote node's address, peer and timeout, its tls files, and the serve section",
          "[config]") {
    const std::string l4_text = describe(load_config(EXAMPLES / "l4-remote.json"));
    INFO(l4_text);
    CHECK_THAT(l4_text, Catch::Contains("\n  /hb (remote node at 10.0.0.2:7471, tls peer hb, lost after 3000 ms)\n"));
    CHECK_THAT(l4_text,
               Catch::Contains("\nremote node hb: tls files: ca /etc/canopy/ca.pem, cert /etc/canopy/rack.pem, "
                               "key /etc/canopy/rack.key\n"));
    CHECK_THAT(l4_text, Catch::Contains("\nserve: off\n"));
    CHECK_THAT(l4_text, Catch::Contains("\ntesting: fault kernels off, insecure peers off\n"));

    const std::string l3_text = describe(load_config(EXAMPLES / "l3-serve.json"));
    INFO(l3_text);
    CHECK_THAT(l3_text, Catch::Contains("\nserve: listen on 0.0.0.0:7471, tls peer rack, lost after 3000 ms\n"
                                        "  tls files: ca /etc/canopy/ca.pem, cert /etc/canopy/hb.pem, key "
                                        "/etc/canopy/hb.key\n"));

    const std::string insecure =
        describe(parse_config(l4(remote("[::1]:7471", R"("insecure")", R"(, "lost_after_ms": 500)")) + ""));
    CHECK_THAT(insecure, Catch::Contains("\n  /hb (remote node at [::1]:7471, tls insecure, lost after 500 ms)\n"));
    CHECK_THAT(insecure, !Catch::Contains("remote node hb:"));
    const std::string insecure_serve = describe(
        parse_config(served(serve_at("127.0.0.1:1", R"("insecure")"), R"("testing": {"insecure_peers": true})")));
    CHECK_THAT(insecure_serve, Catch::Contains("\nserve: listen on 127.0.0.1:1, tls insecure, lost after 3000 ms\n"
                                               "testing: fault kernels off, insecure peers on\n"));
}
