// Remote nodes of a level-4 node: their keys, addresses and tls values.

#include "remote_test_util.h"

using namespace canopy::config;
using namespace canopy::config::testing;

namespace {

NetAddress address_of(const std::string& text) {
    const Config config = parse_config(l4(remote(text)));
    REQUIRE(config.node.nodes.size() == 1);
    REQUIRE(config.node.nodes[0].remote.has_value());
    return config.node.nodes[0].remote->address;
}

} // namespace

TEST_CASE("a remote node is read with its address, tls files, peer name and loss timeout", "[config]") {
    const Config config = parse_config(l4(remote("10.0.0.2:7471", TLS, R"(, "lost_after_ms": 1500)")));
    REQUIRE(config.node.nodes.size() == 1);
    const NodeConfig& node = config.node.nodes[0];
    CHECK(node.name == "hb");
    CHECK(node.level == 3);
    CHECK(node.chips.empty());
    CHECK(node.subs == 0);
    CHECK(node.nodes.empty());
    REQUIRE(node.remote.has_value());
    CHECK(node.remote->address == NetAddress{"10.0.0.2", 7471});
    CHECK_FALSE(node.remote->tls.insecure);
    CHECK(node.remote->tls.ca == "/etc/canopy/ca.pem");
    CHECK(node.remote->tls.cert == "/etc/canopy/l4.pem");
    CHECK(node.remote->tls.key == "/etc/canopy/l4.key");
    CHECK(node.remote->tls.peer_name == "hb");
    CHECK(node.remote->lost_after == std::chrono::milliseconds(1500));
    CHECK(parse_config(l4(remote("10.0.0.2:7471"))).node.nodes[0].remote->lost_after ==
          std::chrono::milliseconds(3000));
}

TEST_CASE("a remote node is a nested node: it alone satisfies a level-4 node, and sits beside local ones", "[config]") {
    CHECK(parse_config(l4(remote("hb:7471"))).node.nodes.size() == 1);
    const Config mixed = parse_config(l4(L3 + ", " + remote("10.0.0.3:7471", TLS, "", "hc")));
    REQUIRE(mixed.node.nodes.size() == 2);
    CHECK_FALSE(mixed.node.nodes[0].remote.has_value());
    CHECK(mixed.node.nodes[1].remote.has_value());
    CHECK(mixed.node.nodes[1].name == "hc");
    require_rejected(with_node(R"({"level": 3, "nodes": [)" + remote("hb:7471") + "]}"), "/node/nodes",
                     "a level-3 node has no nested nodes, got 1");
    require_rejected(with_node(R"({"subs": 1, "remote": "hb:7471"})"), "/node/remote", R"(unknown key "remote")");
}

TEST_CASE("a remote node takes no level, chips, subs or nodes: its host's config lists its workers", "[config]") {
    const std::string message = "a remote node's workers are in its own host's config; ";
    require_all_rejected({
        {"level", l4(remote("hb:1", TLS, R"(, "level": 3)")), "/node/nodes/0/level",
         message + R"("level" is not allowed here)"},
        {"chips", l4(remote("hb:1", TLS, R"(, "chips": [])")), "/node/nodes/0/chips",
         message + R"("chips" is not allowed here)"},
        {"subs", l4(remote("hb:1", TLS, R"(, "subs": 2)")), "/node/nodes/0/subs",
         message + R"("subs" is not allowed here)"},
        {"nodes", l4(remote("hb:1", TLS, R"(, "nodes": [])")), "/node/nodes/0/nodes",
         message + R"("nodes" is not allowed here)"},
    });
}

TEST_CASE("a remote node needs a name and tls and takes only name, remote, tls and lost_after_ms", "[config]") {
    require_all_rejected({
        {"no name", l4(R"({"remote": "hb:1", "tls": "insecure"})"), "/node/nodes/0/name",
         R"(missing required key "name")"},
        {"no tls", l4(R"({"name": "hb", "remote": "hb:1"})"), "/node/nodes/0/tls", R"(missing required key "tls")"},
        {"unknown key", l4(remote("hb:1", TLS, R"(, "port": 1)")), "/node/nodes/0/port", R"(unknown key "port")"},
        {"near miss", l4(remote("hb:1", TLS, R"(, "lost_aftr_ms": 1)")), "/node/nodes/0/lost_aftr_ms",
         R"(unknown key "lost_aftr_ms" (did you mean "lost_after_ms"?))"},
        {"remote not a string", l4(R"({"name": "hb", "remote": 7471, "tls": "insecure"})"), "/node/nodes/0/remote",
         "expected a string, got integer 7471"},
        {"tls without remote", l4(R"({"name": "hb", "subs": 1, "tls": "insecure"})"), "/node/nodes/0/tls",
         R"("tls" belongs to a remote node, which needs "remote": "HOST:PORT" too)"},
        {"lost_after_ms without remote", l4(R"({"name": "hb", "subs": 1, "lost_after_ms": 3000})"),
         "/node/nodes/0/lost_after_ms", R"("lost_after_ms" belongs to a remote node)"},
    });
}

TEST_CASE("a remote node's lost_after_ms is an integer from 100 to 600000", "[config]") {
    require_all_rejected({
        {"below", l4(remote("hb:1", TLS, R"(, "lost_after_ms": 99)")), "/node/nodes/0/lost_after_ms",
         "expected an integer from 100 to 600000, got 99"},
        {"above", l4(remote("hb:1", TLS, R"(, "lost_after_ms": 600001)")), "/node/nodes/0/lost_after_ms",
         "expected an integer from 100 to 600000, got 600001"},
        {"fraction", l4(remote("hb:1", TLS, R"(, "lost_after_ms": 3000.5)")), "/node/nodes/0/lost_after_ms",
         "expected an integer, got number 3000.5"},
    });
    for (const int ms : {100, 600000}) {
        const Config config = parse_config(l4(remote("hb:1", TLS, R"(, "lost_after_ms": )" + std::to_string(ms))));
        CHECK(config.node.nodes[0].remote->lost_after == std::chrono::milliseconds(ms));
    }
}

TEST_CASE("remote node names follow the nested-node rules and are unique among nested nodes", "[config]") {
    require_all_rejected({
        {"worker name", l4(remote("hb:1", TLS, "", "chip0")), "/node/nodes/0/name",
         R"(expected a node name that is not a worker name (chipN, subN), got "chip0")"},
        {"bad character", l4(remote("hb:1", TLS, "", "h b")), "/node/nodes/0/name",
         R"(expected a name of letters, digits, '_', '.' and '-', got "h b")"},
        {"same as a local node", l4(L3 + ", " + remote("hb:1")), "/node/nodes/1/name",
         R"(duplicate node name "hb" (also at /node/nodes/0/name))"},
        {"same as a remote node", l4(remote("ha:1") + ", " + remote("hb:1")), "/node/nodes/1/name",
         R"(duplicate node name "hb" (also at /node/nodes/0/name))"},
    });
}

TEST_CASE("two remote nodes at one address are refused", "[config]") {
    require_rejected(l4(remote("10.0.0.2:7471", TLS, "", "a") + ", " + remote("10.0.0.2:7471", TLS, "", "b")),
                     "/node/nodes/1/remote",
                     "duplicate remote address 10.0.0.2:7471 (also at /node/nodes/0/remote, the same host and port)");
    // Another spelling of the same host: a DNS name in another case, an IPv6 address written out.
    require_rejected(l4(remote("HB.rack:7471", TLS, "", "a") + ", " + remote("hb.RACK:7471", TLS, "", "b")),
                     "/node/nodes/1/remote",
                     "duplicate remote address hb.RACK:7471 (also at /node/nodes/0/remote, the same host and port)");
    require_rejected(l4(remote("[fd00::2]:7471", TLS, "", "a") + ", " + remote("[fd00:0:0::2]:7471", TLS, "", "b")),
                     "/node/nodes/1/remote", "duplicate remote address [fd00:0:0::2]:7471");
    CHECK(parse_config(l4(remote("10.0.0.2:7471", TLS, "", "a") + ", " + remote("10.0.0.2:7472", TLS, "", "b")))
              .node.nodes.size() == 2);
}

TEST_CASE("a remote address is HOST:PORT and every malformed one is refused naming it", "[config]") {
    const std::string pointer = "/node/nodes/0/remote";
    const std::string forms = "expected HOST:PORT (HOST a DNS name, a dotted IPv4 address or an IPv6 address in "
                              "brackets; PORT 1..65535), got ";
    require_all_rejected({
        {"no port", l4(remote("10.0.0.2")), pointer, forms + R"("10.0.0.2")"},
        {"empty port", l4(remote("10.0.0.2:")), pointer, forms + R"("10.0.0.2:")"},
        {"empty host", l4(remote(":7471")), pointer, forms + R"(":7471")"},
        {"port 0", l4(remote("10.0.0.2:0")), pointer, "port must be 1..65535, got 0"},
        {"port 65536", l4(remote("hb:65536")), pointer, "port must be 1..65535, got 65536"},
        {"port of many digits", l4(remote("hb:000000000000000000070000")), pointer,
         "port must be 1..65535, got 000000000000000000070000"},
        {"port word", l4(remote("hb:http")), pointer, R"(port must be 1..65535, got "http")"},
        {"signed port", l4(remote("hb:+80")), pointer, R"(port must be 1..65535, got "+80")"},
        {"IPv6 without brackets", l4(remote("fd00::2:7471")), pointer,
         R"(expected an IPv6 host in brackets ("[fd00::2]:7471"), got "fd00::2:7471")"},
        {"IPv6 without a port", l4(remote("[fd00::2]")), pointer, forms + R"("[fd00::2]")"},
        {"bracket not closed", l4(remote("[fd00::2:7471")), pointer, forms + R"("[fd00::2:7471")"},
        {"text after the bracket", l4(remote("[fd00::2]x:7471")), pointer, forms},
        {"not IPv6 in brackets", l4(remote("[hb]:7471")), pointer,
         R"(expected an IPv6 address between the brackets, got "[hb]")"},
        {"IPv6 zone", l4(remote("[fe80::1%eth0]:7471")), pointer, R"(between the brackets, got "[fe80::1%eth0]")"},
        {"NUL after an IPv6 address", l4(remote(R"([::1\u0000x]:7471)")), pointer,
         "expected an IPv6 address between the brackets, got "},
        {"IPv4 part above 255", l4(remote("10.0.0.256:7471")), pointer,
         R"(expected a dotted IPv4 address (four numbers 0..255), got "10.0.0.256")"},
        {"IPv4 of three parts", l4(remote("10.0.2:7471")), pointer, R"(four numbers 0..255), got "10.0.2")"},
        {"IPv4 with a trailing dot", l4(remote("10.0.0.2.:7471")), pointer, R"(got "10.0.0.2.")"},
        {"underscore", l4(remote("h_b:7471")), pointer,
         R"(expected a host name of dot-separated labels of 1 to 63 letters, digits and '-' (not at either end of )"
         R"(a label), got "h_b")"},
        {"empty label", l4(remote("a..b:7471")), pointer, R"(got "a..b")"},
        {"trailing dot", l4(remote("hb.:7471")), pointer, R"(got "hb.")"},
        {"label starts with '-'", l4(remote("-hb:7471")), pointer, R"(got "-hb")"},
        {"label ends with '-'", l4(remote("hb-.rack:7471")), pointer, R"(got "hb-.rack")"},
        {"label of 64 bytes", l4(remote(std::string(64, 'a') + ".rack:1")), pointer, "expected a host name of"},
        {"host of 254 bytes",
         l4(remote(std::string(62, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') + "." +
                   std::string(63, 'd') + ":1")),
         pointer, "expected a host name of at most 253 bytes, got 254 bytes"},
    });
}

TEST_CASE("a remote address accepts DNS names, dotted IPv4 and bracketed IPv6 addresses", "[config]") {
    CHECK(address_of("hb:1") == NetAddress{"hb", 1});
    CHECK(address_of("hb-2.rack.example.com:65535") == NetAddress{"hb-2.rack.example.com", 65535});
    CHECK(address_of("0.0.0.0:7471") == NetAddress{"0.0.0.0", 7471});
    CHECK(address_of("255.255.255.255:7471") == NetAddress{"255.255.255.255", 7471});
    CHECK(address_of("10.0.0.2:07471") == NetAddress{"10.0.0.2", 7471});
    CHECK(address_of("[fd00::2]:7471") == NetAddress{"fd00::2", 7471});
    CHECK(address_of("[::ffff:10.0.0.2]:7471") == NetAddress{"::ffff:10.0.0.2", 7471});
    CHECK(address_of("[2001:db8:0:0:0:0:0:1]:1") == NetAddress{"2001:db8:0:0:0:0:0:1", 1});
    const std::string label63(63, 'a');
    CHECK(address_of(label63 + ".b:1").host == label63 + ".b");
    const std::string host253 =
        std::string(61, 'a') + "." + std::string(63, 'b') + "." + std::string(63, 'c') + "." + std::string(63, 'd');
    REQUIRE(host253.size() == 253);
    CHECK(address_of(host253 + ":1").host == host253);
}

TEST_CASE("tls is the word insecure or an object of exactly ca, cert, key and peer_name", "[config]") {
    const std::string pointer = "/node/nodes/0/tls";
    const std::string expected = R"(expected "insecure" or an object with ca, cert, key and peer_name, got )";
    require_all_rejected({
        {"another word", l4(remote("hb:1", R"("secure")")), pointer, expected + R"("secure")"},
        {"a boolean", l4(remote("hb:1", "false")), pointer, expected + "boolean false"},
        {"an array", l4(remote("hb:1", "[]")), pointer, expected + "array"},
        {"no ca", l4(remote("hb:1", R"({"cert": "/c", "key": "/k", "peer_name": "hb"})")), pointer + "/ca",
         R"(missing required key "ca")"},
        {"no cert", l4(remote("hb:1", R"({"ca": "/a", "key": "/k", "peer_name": "hb"})")), pointer + "/cert",
         R"(missing required key "cert")"},
        {"no key", l4(remote("hb:1", R"({"ca": "/a", "cert": "/c", "peer_name": "hb"})")), pointer + "/key",
         R"(missing required key "key")"},
        {"no peer_name", l4(remote("hb:1", R"({"ca": "/a", "cert": "/c", "key": "/k"})")), pointer + "/peer_name",
         R"(missing required key "peer_name")"},
        {"unknown key",
         l4(remote("hb:1", R"({"ca": "/ca", "cert": "/c", "key": "/k", "peer_name": "hb", "crl": "/r"})")),
         pointer + "/crl", R"(unknown key "crl")"},
        {"relative ca", l4(remote("hb:1", R"({"ca": "ca.pem", "cert": "/c", "key": "/k", "peer_name": "hb"})")),
         pointer + "/ca", R"(expected an absolute path, got "ca.pem")"},
        {"relative cert", l4(remote("hb:1", R"({"ca": "/ca", "cert": "", "key": "/k", "peer_name": "hb"})")),
         pointer + "/cert", R"(expected an absolute path, got "")"},
        {"relative key", l4(remote("hb:1", R"({"ca": "/ca", "cert": "/c", "key": "k", "peer_name": "hb"})")),
         pointer + "/key", R"(expected an absolute path, got "k")"},
        {"empty peer_name", l4(remote("hb:1", R"({"ca": "/ca", "cert": "/c", "key": "/k", "peer_name": ""})")),
         pointer + "/peer_name", "expected a peer name of 1 to 253 bytes, got 0 bytes"},
        {"long peer_name",
         l4(remote("hb:1",
                   R"({"ca": "/ca", "cert": "/c", "key": "/k", "peer_name": ")" + std::string(254, 'p') + "\"}")),
         pointer + "/peer_name", "expected a peer name of 1 to 253 bytes, got 254 bytes"},
        {"peer_name with '_'", l4(remote("hb:1", R"({"ca": "/ca", "cert": "/c", "key": "/k", "peer_name": "h_b"})")),
         pointer + "/peer_name", R"(expected a peer name of letters, digits, '.' and '-', got "h_b")"},
        {"peer_name not a string", l4(remote("hb:1", R"({"ca": "/ca", "cert": "/c", "key": "/k", "peer_name": 1})")),
         pointer + "/peer_name", "expected a string, got integer 1"},
    });
    const Config config = parse_config(l4(
        remote("hb:1", R"({"ca": "/ca", "cert": "/c", "key": "/k", "peer_name": ")" + std::string(253, 'p') + "\"}")));
    CHECK(config.node.nodes[0].remote->tls.peer_name == std::string(253, 'p'));
}

TEST_CASE("is_loopback_host takes localhost, 127.0.0.0/8 and ::1 and nothing else", "[config]") {
    for (const char* host : {"localhost", "127.0.0.1", "127.255.255.255", "::1", "0:0:0:0:0:0:0:1"}) {
        INFO(host);
        CHECK(is_loopback_host(host));
    }
    for (const char* host : {"LOCALHOST", "localhost.", "128.0.0.1", "126.255.255.255", "0.0.0.0",
                             "::", "::ffff:127.0.0.1", "127.1", "[::1]", "", "10.0.0.2", "hb"}) {
        INFO(host);
        CHECK_FALSE(is_loopback_host(host));
    }
    CHECK_FALSE(is_loopback_host(std::string_view("127.0.0.1\0x", 11)));
    CHECK_FALSE(is_loopback_host(std::string(100, '1')));
}

TEST_CASE("to_string writes a net address as HOST:PORT with brackets around an IPv6 host", "[config]") {
    CHECK(to_string(NetAddress{"10.0.0.2", 7471}) == "10.0.0.2:7471");
    CHECK(to_string(NetAddress{"hb.rack", 1}) == "hb.rack:1");
    CHECK(to_string(NetAddress{"fd00::2", 65535}) == "[fd00::2]:65535");
}
