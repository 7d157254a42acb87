// The "node" section: the worker tree of one supervisor, and the nested level-3 nodes of a level-4 one, local
// or remote.

#include "config/config_error.h"
#include "config/detail/sections.h"
#include "config/detail/values.h"
#include "protocol/descriptor.h"

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <cctype>
#include <map>
#include <string>
#include <utility>

namespace canopy::config::detail {
namespace {

constexpr std::array<std::string_view, 2> CHIP_BACKEND_NAMES = {"cuda", "sim"};
constexpr std::array<ChipBackend, 2> CHIP_BACKENDS = {ChipBackend::CUDA, ChipBackend::SIM};

ChipConfig parse_chip(const Field& field) {
    const ObjectReader object(field, {"device", "backend"});
    ChipConfig chip;
    chip.device = static_cast<std::uint32_t>(object.require("device").integer(0, MAX_DEVICE_ORDINAL - 1));
    chip.backend = CHIP_BACKENDS[object.require("backend").choice(CHIP_BACKEND_NAMES)];
    return chip;
}

// One process per device: a (backend, device) pair appears once per node.
std::vector<ChipConfig> parse_chips(const std::vector<Field>& elements) {
    std::vector<ChipConfig> chips;
    std::map<std::pair<ChipBackend, std::uint32_t>, std::string> seen;
    for (const Field& element : elements) {
        const ChipConfig chip = parse_chip(element);
        const auto [it, inserted] = seen.emplace(std::pair{chip.backend, chip.device}, element.pointer());
        if (!inserted) {
            element.fail("duplicate chip: " + std::string(to_string(chip.backend)) + " device " +
                         std::to_string(chip.device) + " is also " + it->second);
        }
        chips.push_back(chip);
    }
    return chips;
}

std::string parse_node_name(const Field& field) {
    std::string name = read_name(field);
    if (is_worker_name(name)) {
        field.fail("expected a node name that is not a worker name (chipN, subN), got " + quote_value(field.value()));
    }
    return name;
}

NodeConfig parse_nested_node(const Field& field);

// An address as a host is reached: a DNS name in lower case (names are case-insensitive), an IPv6 address in
// inet_ntop's one spelling ([fd00:0::2] is [fd00::2]); a dotted IPv4 address has one spelling already.
std::string address_key(const NetAddress& address) {
    std::string host = address.host;
    in6_addr v6{};
    if (host.find(':') != std::string::npos && ::inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
        char text[INET6_ADDRSTRLEN] = {};
        if (::inet_ntop(AF_INET6, &v6, text, sizeof text) != nullptr) {
            host = std::string("[") + text + "]";
        }
    } else {
        std::transform(host.begin(), host.end(), host.begin(),
                       [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    }
    return host + ":" + std::to_string(address.port);
}

// Two remote nodes at one address would share the one L4 session its canopyd serves.
void check_remote_address(const Field& element, const NodeConfig& node, std::map<std::string, std::string>& seen) {
    if (!node.remote) {
        return;
    }
    const std::string address = to_string(node.remote->address);
    const auto [it, inserted] = seen.emplace(address_key(node.remote->address), element.pointer() + "/remote");
    if (!inserted) {
        throw ConfigError(element.pointer() + "/remote", "duplicate remote address " + address + " (also at " +
                                                             it->second + ", the same host and port)");
    }
}

std::vector<NodeConfig> parse_nested_nodes(const std::vector<Field>& elements) {
    std::vector<NodeConfig> nodes;
    std::map<std::string, std::string> names;
    std::map<std::string, std::string> addresses;
    for (const Field& element : elements) {
        NodeConfig node = parse_nested_node(element);
        const auto [it, inserted] = names.emplace(node.name, element.pointer() + "/name");
        if (!inserted) {
            throw ConfigError(element.pointer() + "/name",
                              "duplicate node name \"" + node.name + "\" (also at " + it->second + ")");
        }
        check_remote_address(element, node, addresses);
        nodes.push_back(std::move(node));
    }
    return nodes;
}

// 3, or 3 or 4 for a root node.
int read_level(const Field& field, bool nested) {
    if (!field.value().is_number_integer()) {
        field.fail_type("an integer");
    }
    if (field.value() == 3) {
        return 3;
    }
    if (field.value() == 4 && !nested) {
        return 4;
    }
    field.fail(std::string(nested ? "expected 3 (a nested node is a level-3 node)" : "expected 3 or 4") + ", got " +
               quote_value(field.value()));
}

// The keys every node shares, read once `node.level` is known.
void parse_children(const ObjectReader& object, NodeConfig& node) {
    if (const auto chips = object.find("chips")) {
        const std::vector<Field> elements = chips->elements();
        if (node.level == 4 && !elements.empty()) {
            chips->fail("a level-4 node has no chips of its own (they belong to its nested nodes), got " +
                        std::to_string(elements.size()));
        }
        node.chips = parse_chips(elements);
    }
    if (const auto subs = object.find("subs")) {
        node.subs = static_cast<std::uint32_t>(subs->integer(0, MAX_SUBS));
    }
    if (const auto nodes = object.find("nodes")) {
        const std::vector<Field> elements = nodes->elements();
        if (node.level == 3 && !elements.empty()) {
            nodes->fail("a level-3 node has no nested nodes, got " + std::to_string(elements.size()));
        }
        node.nodes = parse_nested_nodes(elements);
    }
}

void check_children(const ObjectReader& object, const NodeConfig& node) {
    if (node.level == 4 && node.nodes.empty()) {
        throw ConfigError(object.pointer_of("nodes"), "a level-4 node needs at least one nested node, got none");
    }
    if (node.chips.empty() && node.subs == 0 && node.nodes.empty()) {
        object.field().fail("a node needs at least one worker (a chip, a sub or a nested node), got none");
    }
}

// A nested node with "remote": a level-3 node whose workers its own host's config lists.
NodeConfig parse_remote_node(const Field& field) {
    for (const std::string_view key : {"level", "chips", "subs", "nodes"}) {
        if (field.value().contains(key)) {
            throw ConfigError(field.pointer() + "/" + std::string(key),
                              "a remote node's workers are in its own host's config; \"" + std::string(key) +
                                  "\" is not allowed here");
        }
    }
    const ObjectReader object(field, {"name", "remote", "tls", "lost_after_ms"});
    NodeConfig node;
    node.name = parse_node_name(object.require("name"));
    RemoteConfig remote;
    remote.address = read_net_address(object.require("remote"));
    remote.tls = read_tls(object.require("tls"));
    if (const auto lost_after = object.find("lost_after_ms")) {
        remote.lost_after = read_lost_after(*lost_after);
    }
    node.remote = std::move(remote);
    return node;
}

NodeConfig parse_nested_node(const Field& field) {
    if (field.value().is_object() && field.value().contains("remote")) {
        return parse_remote_node(field);
    }
    for (const std::string_view key : {"tls", "lost_after_ms"}) {
        if (field.value().is_object() && field.value().contains(key)) {
            throw ConfigError(field.pointer() + "/" + std::string(key),
                              "\"" + std::string(key) +
                                  "\" belongs to a remote node, which needs \"remote\": "
                                  "\"HOST:PORT\" too");
        }
    }
    const ObjectReader object(field, {"name", "level", "chips", "subs", "nodes"});
    NodeConfig node;
    node.name = parse_node_name(object.require("name"));
    if (const auto level = object.find("level")) {
        node.level = read_level(*level, true);
    }
    parse_children(object, node);
    check_children(object, node);
    return node;
}

} // namespace

NodeConfig parse_root_node(const Field& field) {
    const ObjectReader object(field, {"name", "level", "chips", "subs", "nodes"});
    NodeConfig node;
    if (const auto name = object.find("name")) {
        node.name = parse_node_name(*name);
    }
    if (const auto level = object.find("level")) {
        node.level = read_level(*level, false);
    }
    parse_children(object, node);
    check_children(object, node);
    return node;
}

} // namespace canopy::config::detail
