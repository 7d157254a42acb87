#pragma once
// Documents with remote nodes and serve sections for the config tests.

#include "config/to_json.h"
#include "config_test_util.h"

#include <string>

namespace canopy::config::testing {

inline const std::string TLS =
    R"({"ca": "/etc/canopy/ca.pem", "cert": "/etc/canopy/l4.pem", "key": "/etc/canopy/l4.key",
                            "peer_name": "hb"})";
inline const std::string SERVE_TLS = R"({"ca": "/ca.pem", "cert": "/hb.pem", "key": "/hb.key", "peer_name": "rack"})";
inline const std::string L3 = R"({"name": "hb", "chips": [{"device": 0, "backend": "sim"}]})";

// A level-4 document whose nodes are `nested` (a ", "-joined list of node objects), with `sections` added.
inline std::string l4(const std::string& nested, const std::string& sections = "") {
    return R"({"node": {"name": "rack", "level": 4, "nodes": [)" + nested + "]}" +
           (sections.empty() ? "" : ", " + sections) + "}";
}

// A remote node object named `name` at `address` with `tls` and `extra` (", "-prefixed keys) added.
inline std::string remote(const std::string& address, const std::string& tls = TLS, const std::string& extra = "",
                          const std::string& name = "hb") {
    return R"({"name": ")" + name + R"(", "remote": ")" + address + R"(", "tls": )" + tls + extra + "}";
}

// A level-3 document with `serve` as its serve object and `sections` added.
inline std::string served(const std::string& serve, const std::string& sections = "") {
    return R"({"node": )" + L3 + R"(, "serve": )" + serve + (sections.empty() ? "" : ", " + sections) + "}";
}

inline std::string serve_at(const std::string& listen, const std::string& tls = SERVE_TLS) {
    return R"({"listen": ")" + listen + R"(", "tls": )" + tls + "}";
}

} // namespace canopy::config::testing
