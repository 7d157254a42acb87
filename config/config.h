#pragma once
// The daemon's configuration: plain value types for every section of the topology JSON (docs/config.md),
// and the entry points that produce, check and print them.
//
// Every Config returned by parse_config, load_config or default_config satisfies all the rules of the
// schema; a Config built by hand is not checked until it goes through to_json and parse_config.
// Structs own all their data. Equality is field-wise.
//
// Thread safety: plain values; every function is safe to call from any thread (default_config reads the
// directory it is given and nothing else).

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::config {

enum class ChipBackend { CUDA, SIM };
enum class PreloadBackend { FORK_COW, FORK_SHM };
enum class LogLevel { TRACE, DEBUG, INFO, WARN, ERROR, CRITICAL, OFF };
enum class LogFormat { AUTO, TEXT, JOURNAL };

// The spellings used in the JSON ("cuda", "fork_cow", "info", "journal").
std::string_view to_string(ChipBackend backend) noexcept;
std::string_view to_string(PreloadBackend backend) noexcept;
std::string_view to_string(LogLevel level) noexcept;
std::string_view to_string(LogFormat format) noexcept;

// Limits of the schema. Names (nodes, preloads) are 1..MAX_NAME_LENGTH bytes of [A-Za-z0-9_.-].
inline constexpr std::size_t MAX_NAME_LENGTH = 64;
inline constexpr std::uint32_t MAX_SUBS = 64;
inline constexpr std::size_t MAX_SOCKET_PATH_BYTES = 107; // sun_path holds 108 bytes with the NUL
inline constexpr std::uint32_t MIN_FRAME_BYTES = 1024;
inline constexpr std::uint32_t MAX_FRAME_BYTES = 64u << 20;
// control.task_history: 1 to this many finished tasks remembered.
inline constexpr std::uint32_t MAX_TASK_HISTORY = 1000000;
// control.max_connections and metrics.max_connections: each connection holds one fd (LimitNOFILE is 65536).
inline constexpr std::uint32_t MAX_CONNECTIONS = 65536;
inline constexpr std::uint32_t MAX_METRICS_CONNECTIONS = 4096;
// control.max_queued_reply_bytes: 64 KiB to 1 GiB.
inline constexpr std::uint64_t MIN_QUEUED_REPLY_BYTES = std::uint64_t{64} << 10;
inline constexpr std::uint64_t MAX_QUEUED_REPLY_BYTES = std::uint64_t{1} << 30;
// control.max_attachment_bytes: 0 to 2^48, the largest buffer.
inline constexpr std::uint64_t MAX_ATTACHMENT_BYTES = std::uint64_t{1} << 48;
inline constexpr std::uint64_t MAX_PRELOAD_BYTES = std::uint64_t{1} << 40;
inline constexpr std::uint32_t MAX_RESTART_BUDGET = 1000;
// Every *_ms duration fits the int milliseconds that poll, epoll_wait and timerfd callers take.
inline constexpr std::int64_t MAX_DURATION_MS = 2147483647;

// Whether `name` is one a config may give a node: 1..MAX_NAME_LENGTH bytes of [A-Za-z0-9_.-], not made of dots
// alone, and not a worker name (chipN, subN).
bool is_node_name(std::string_view name) noexcept;
// True for "chip<digits>" and "sub<digits>", the names of workers.
bool is_worker_name(std::string_view name) noexcept;

// One chip worker: a process that owns one GPU (CUDA) or one simulated device (SIM).
struct ChipConfig {
    std::uint32_t device = 0; // device ordinal, < canopy::MAX_DEVICE_ORDINAL
    ChipBackend backend = ChipBackend::SIM;

    bool operator==(const ChipConfig&) const = default;
};

// A TCP endpoint of a link between hosts. host is a DNS name, a dotted IPv4 address or an IPv6 address
// (written in brackets in "HOST:PORT" text, kept here without them); port is 1..65535.
struct NetAddress {
    std::string host;
    std::uint16_t port = 0;

    bool operator==(const NetAddress&) const = default;
};

// "HOST:PORT", with brackets around an IPv6 host ("[fd00::2]:7471").
std::string to_string(const NetAddress& address);

// Whether `host` names this machine's loopback: "localhost", 127.0.0.0/8 or ::1.
bool is_loopback_host(std::string_view host) noexcept;

// How one end of a link between hosts proves itself and checks its peer. Mutual TLS: `ca` signs the peer's
// certificate, `cert` and `key` are this end's, and the peer's certificate must carry `peer_name` (a DNS
// subject alternative name). insecure ("tls": "insecure"): plain TCP, only for tests.
struct TlsConfig {
    bool insecure = false;
    std::filesystem::path ca;   // absolute; read when the daemon starts
    std::filesystem::path cert; // absolute
    std::filesystem::path key;  // absolute
    std::string peer_name;      // 1..253 bytes of [A-Za-z0-9.-]

    bool operator==(const TlsConfig&) const = default;
};

// A nested node of a level-4 node that runs on another host: a canopyd there serves it (Config::serve).
inline constexpr std::int64_t MIN_LOST_AFTER_MS = 100;
inline constexpr std::int64_t MAX_LOST_AFTER_MS = 600000;
struct RemoteConfig {
    NetAddress address;
    TlsConfig tls;
    // A host not heard from this long is lost: its tasks fail and the link reconnects with back-off.
    std::chrono::milliseconds lost_after{3000};

    bool operator==(const RemoteConfig&) const = default;
};

// A supervisor and its children. Children are named chip0.., sub0.. in order, and nested nodes by name.
// A level-3 node has chips and subs; a level-4 node has subs and nested level-3 nodes, never chips. A
// nested node with `remote` set lives on another host: it has no chips, subs or nodes of its own here (its
// host's config says what it runs) and level 3.
struct NodeConfig {
    std::string name = "local";
    int level = 3;
    std::vector<ChipConfig> chips;
    std::uint32_t subs = 0;
    std::vector<NodeConfig> nodes;
    std::optional<RemoteConfig> remote;

    bool operator==(const NodeConfig&) const = default;
};

// A level-3 canopyd that serves one level-4 supervisor on another host (docs/multihost.md).
struct ServeConfig {
    NetAddress listen;
    TlsConfig tls;
    // An L4 not heard from this long is gone: its session ends and the next L4 connection is accepted.
    std::chrono::milliseconds lost_after{3000};

    bool operator==(const ServeConfig&) const = default;
};

struct ControlConfig {
    std::filesystem::path socket = "/run/canopy/canopy.sock";
    // Peers allowed besides the daemon's own uid; no duplicates.
    std::vector<std::uint32_t> allow_uids;
    std::vector<std::uint32_t> allow_gids;
    // Admins besides the daemon's own uid (docs/config.md): shutdown, module loads, worker restarts, and any
    // user's buffers.
    std::vector<std::uint32_t> admin_uids;
    std::vector<std::uint32_t> admin_gids;
    std::uint32_t max_frame_bytes = 1u << 20;
    // Finished tasks remembered for `tasks` and `wait`, newest first.
    std::uint32_t task_history = 10000;
    // Connections open at once (the daemon's own uid gets a few more); from a frame's first byte to its last; a
    // connection that owes nothing and sends nothing this long is closed; reply bytes a connection may have
    // queued before the daemon reads no further request from it.
    std::uint32_t max_connections = 1024;
    std::chrono::milliseconds frame_timeout{10'000};
    std::chrono::milliseconds idle_timeout{300'000};
    std::uint64_t max_queued_reply_bytes = std::uint64_t{16} << 20;
    // Raw bytes one buffer.write may carry after its frame (docs/control-protocol.md, "Attachments").
    std::uint64_t max_attachment_bytes = std::uint64_t{64} << 30;

    bool operator==(const ControlConfig&) const = default;
};

struct LogConfig {
    LogLevel level = LogLevel::INFO;
    LogFormat format = LogFormat::AUTO;

    bool operator==(const LogConfig&) const = default;
};

// An arena mapped before the zygote fork. FORK_COW maps the file at `path` privately (read-only for
// consumers) and has bytes == 0: its size is the file's, found when the daemon starts. FORK_SHM maps
// `bytes` bytes shared, filled from `path` when one is given. Existence of `path` is not checked here.
struct PreloadConfig {
    std::string name;
    std::optional<std::filesystem::path> path;
    std::uint64_t bytes = 0;
    PreloadBackend backend = PreloadBackend::FORK_COW;

    bool operator==(const PreloadConfig&) const = default;
};

struct SupervisionConfig {
    std::uint32_t restart_budget = 5;
    std::chrono::milliseconds backoff_initial{50};
    std::chrono::milliseconds backoff_max{5000}; // >= backoff_initial
    std::chrono::milliseconds drain_timeout{10000};
    std::chrono::milliseconds task_timeout{0}; // 0: tasks have no timeout

    bool operator==(const SupervisionConfig&) const = default;
};

// A loopback TCP endpoint. host is "localhost", a dotted 127.x.x.x address, or an IPv6 loopback
// address without brackets ("::1").
struct ListenAddress {
    std::string host;
    std::uint16_t port = 0;

    bool operator==(const ListenAddress&) const = default;
};

// "HOST:PORT", with brackets around an IPv6 host ("[::1]:9464").
std::string to_string(const ListenAddress& address);

struct MetricsConfig {
    std::optional<ListenAddress> listen; // nullopt: no metrics listener
    std::uint32_t max_connections = 64;
    // For a connection's request head, and again for writing the response.
    std::chrono::milliseconds timeout{5000};

    bool operator==(const MetricsConfig&) const = default;
};

struct TestingConfig {
    bool fault_kernels = false;
    // Allows "tls": "insecure" on addresses that are not loopback (tests between network namespaces).
    bool insecure_peers = false;

    bool operator==(const TestingConfig&) const = default;
};

struct Config {
    NodeConfig node;
    ControlConfig control;
    std::filesystem::path state_dir = "/var/lib/canopy";
    LogConfig log;
    std::vector<PreloadConfig> preload;
    SupervisionConfig supervision;
    MetricsConfig metrics;
    TestingConfig testing;
    std::optional<ServeConfig> serve; // level 3 only

    bool operator==(const Config&) const = default;
};

// Parses and validates a config document. Throws ConfigError (config/config_error.h) naming the JSON
// pointer of the first offending field.
Config parse_config(std::string_view json_text);

// Reads `file` and parses it as parse_config does. A file that cannot be read is a ConfigError with
// pointer "" naming the path and the system's reason.
Config load_config(const std::filesystem::path& file);

// The configuration used when the daemon is given none: level 3, name "local", one CUDA chip per
// /dev/nvidiaN entry of `dev_dir` (ordinals 0..count-1, in ascending N order), or one SIM chip on
// device 0 when there is none; two subs; every other section at its default. Never touches CUDA.
Config default_config(const std::filesystem::path& dev_dir = "/dev");

// Every worker below `node`, in tree order: chips, then subs, then each nested node followed by its
// own workers ("/chip0", "/sub0", "/node0", "/node0/chip0", ...). The root itself ("/") is not listed. A
// remote node lists only its own path ("/hb"): its workers are in its host's config.
std::vector<std::string> worker_paths(const NodeConfig& node);

// A multi-line human-readable summary (for canopyd --check-config): the worker tree with paths, then
// every other section.
std::string describe(const Config& config);

} // namespace canopy::config
