// Every rule of the sections other than "node", each fed a document that breaks it.

#include "config_test_util.h"

using canopy::config::parse_config;
using canopy::config::testing::require_all_rejected;
using canopy::config::testing::require_rejected;
using canopy::config::testing::with_sections;

TEST_CASE("every section must be of its JSON type", "[config]") {
    require_all_rejected({
        {"control", with_sections(R"("control": [])"), "/control", "expected an object, got array"},
        {"state_dir", with_sections(R"("state_dir": 1)"), "/state_dir", "expected a string, got integer 1"},
        {"log", with_sections(R"("log": "info")"), "/log", R"(expected an object, got string "info")"},
        {"preload", with_sections(R"("preload": {})"), "/preload", "expected an array, got object"},
        {"supervision", with_sections(R"("supervision": null)"), "/supervision", "expected an object, got null"},
        {"metrics", with_sections(R"("metrics": true)"), "/metrics", "expected an object, got boolean true"},
        {"testing", with_sections(R"("testing": 0)"), "/testing", "expected an object, got integer 0"},
    });
}

TEST_CASE("control.socket is an absolute path of at most 107 bytes", "[config]") {
    const std::string path_107 = "/" + std::string(106, 's');
    require_all_rejected({
        {"relative", with_sections(R"("control": {"socket": "run/canopy.sock"})"), "/control/socket",
         R"(expected an absolute path, got "run/canopy.sock")"},
        {"empty", with_sections(R"("control": {"socket": ""})"), "/control/socket", "expected an absolute path"},
        {"108 bytes", with_sections(R"("control": {"socket": ")" + path_107 + R"(x"})"), "/control/socket",
         "expected a path of at most 107 bytes, got 108 bytes"},
        {"not a string", with_sections(R"("control": {"socket": 7})"), "/control/socket",
         "expected a string, got integer 7"},
        {"NUL byte", with_sections(R"("control": {"socket": "/run/a\u0000b"})"), "/control/socket",
         "without NUL characters"},
    });
    CHECK(parse_config(with_sections(R"("control": {"socket": ")" + path_107 + R"("})")).control.socket == path_107);
}

TEST_CASE("allow_uids and allow_gids are arrays of distinct integers below 2^32", "[config]") {
    require_all_rejected({
        {"uids not an array", with_sections(R"("control": {"allow_uids": 0})"), "/control/allow_uids",
         "expected an array, got integer 0"},
        {"negative uid", with_sections(R"("control": {"allow_uids": [-1]})"), "/control/allow_uids/0",
         "expected an integer from 0 to 4294967295, got -1"},
        {"uid 2^32", with_sections(R"("control": {"allow_uids": [0, 4294967296]})"), "/control/allow_uids/1",
         "got 4294967296"},
        {"duplicate uid", with_sections(R"("control": {"allow_uids": [5, 6, 5]})"), "/control/allow_uids/2",
         "duplicate id 5 (also at /control/allow_uids/0)"},
        {"gid string", with_sections(R"("control": {"allow_gids": ["wheel"]})"), "/control/allow_gids/0",
         R"(expected an integer, got string "wheel")"},
        {"duplicate gid", with_sections(R"("control": {"allow_gids": [10, 10]})"), "/control/allow_gids/1",
         "duplicate id 10"},
    });
    const auto config = parse_config(with_sections(R"("control": {"allow_uids": [0, 4294967295], "allow_gids": [7]})"));
    CHECK(config.control.allow_uids == std::vector<std::uint32_t>{0, 4294967295u});
    CHECK(config.control.allow_gids == std::vector<std::uint32_t>{7});
}

TEST_CASE("admin_uids and admin_gids are arrays of distinct ids, task_history 1 to 10^6", "[config]") {
    require_all_rejected({
        {"admin uid string", with_sections(R"("control": {"admin_uids": ["root"]})"), "/control/admin_uids/0",
         R"(expected an integer, got string "root")"},
        {"duplicate admin gid", with_sections(R"("control": {"admin_gids": [4, 4]})"), "/control/admin_gids/1",
         "duplicate id 4"},
        {"history 0", with_sections(R"("control": {"task_history": 0})"), "/control/task_history",
         "expected an integer from 1 to 1000000, got 0"},
        {"history too large", with_sections(R"("control": {"task_history": 1000001})"), "/control/task_history",
         "got 1000001"},
    });
    const auto config = parse_config(with_sections(R"("control": {"task_history": 1000000})"));
    CHECK(config.control.task_history == 1000000);
    CHECK(parse_config(with_sections(R"("control": {})")).control.task_history == 10000);
}

TEST_CASE("the control socket's connection limits and timeouts have their ranges", "[config]") {
    require_all_rejected({
        {"no connections", with_sections(R"("control": {"max_connections": 0})"), "/control/max_connections",
         "expected an integer from 1 to 65536, got 0"},
        {"connections past the fd limit", with_sections(R"("control": {"max_connections": 65537})"),
         "/control/max_connections", "got 65537"},
        {"frame timeout 0", with_sections(R"("control": {"frame_timeout_ms": 0})"), "/control/frame_timeout_ms",
         "expected an integer from 1 to 2147483647, got 0"},
        {"idle timeout 2^31", with_sections(R"("control": {"idle_timeout_ms": 2147483648})"),
         "/control/idle_timeout_ms", "got 2147483648"},
        {"reply budget 64 KiB - 1", with_sections(R"("control": {"max_queued_reply_bytes": 65535})"),
         "/control/max_queued_reply_bytes", "expected an integer from 65536 to 1073741824, got 65535"},
        {"reply budget 1 GiB + 1", with_sections(R"("control": {"max_queued_reply_bytes": 1073741825})"),
         "/control/max_queued_reply_bytes", "got 1073741825"},
        {"attachment limit 2^48 + 1", with_sections(R"("control": {"max_attachment_bytes": 281474976710657})"),
         "/control/max_attachment_bytes", "expected an integer from 0 to 281474976710656, got 281474976710657"},
        {"attachment limit -1", with_sections(R"("control": {"max_attachment_bytes": -1})"),
         "/control/max_attachment_bytes", "got -1"},
        {"metrics connections 0", with_sections(R"("metrics": {"max_connections": 0})"), "/metrics/max_connections",
         "expected an integer from 1 to 4096, got 0"},
        {"metrics timeout 0", with_sections(R"("metrics": {"timeout_ms": 0})"), "/metrics/timeout_ms",
         "expected an integer from 1 to 2147483647, got 0"},
        {"metrics timeout a string", with_sections(R"("metrics": {"timeout_ms": "5s"})"), "/metrics/timeout_ms",
         R"(expected an integer, got string "5s")"},
    });
    const auto config = parse_config(with_sections(
        R"("control": {"max_connections": 65536, "frame_timeout_ms": 1, "idle_timeout_ms": 2147483647,
                       "max_queued_reply_bytes": 1073741824, "max_attachment_bytes": 281474976710656},
           "metrics": {"max_connections": 4096, "timeout_ms": 250})"));
    CHECK(config.control.max_connections == 65536);
    CHECK(config.control.frame_timeout == std::chrono::milliseconds(1));
    CHECK(config.control.idle_timeout == std::chrono::milliseconds(2147483647));
    CHECK(config.control.max_queued_reply_bytes == 1073741824);
    CHECK(config.control.max_attachment_bytes == std::uint64_t{1} << 48);
    CHECK(parse_config(with_sections(R"("control": {"max_attachment_bytes": 0})")).control.max_attachment_bytes == 0);
    CHECK(config.metrics.max_connections == 4096);
    CHECK(config.metrics.timeout == std::chrono::milliseconds(250));
    const auto defaults = parse_config(with_sections(R"("control": {})"));
    CHECK(defaults.control.max_connections == 1024);
    CHECK(defaults.control.frame_timeout == std::chrono::milliseconds(10000));
    CHECK(defaults.control.idle_timeout == std::chrono::milliseconds(300000));
    CHECK(defaults.control.max_queued_reply_bytes == std::uint64_t{16} << 20);
    CHECK(defaults.control.max_attachment_bytes == std::uint64_t{64} << 30);
    CHECK(defaults.metrics.max_connections == 64);
    CHECK(defaults.metrics.timeout == std::chrono::milliseconds(5000));
}

TEST_CASE("max_frame_bytes is 1024 to 64 MiB", "[config]") {
    require_all_rejected({
        {"1023", with_sections(R"("control": {"max_frame_bytes": 1023})"), "/control/max_frame_bytes",
         "expected an integer from 1024 to 67108864, got 1023"},
        {"64 MiB + 1", with_sections(R"("control": {"max_frame_bytes": 67108865})"), "/control/max_frame_bytes",
         "got 67108865"},
    });
    CHECK(parse_config(with_sections(R"("control": {"max_frame_bytes": 1024})")).control.max_frame_bytes == 1024);
    CHECK(parse_config(with_sections(R"("control": {"max_frame_bytes": 67108864})")).control.max_frame_bytes ==
          67108864);
}

TEST_CASE("state_dir is an absolute path", "[config]") {
    require_rejected(with_sections(R"("state_dir": "var/lib/canopy")"), "/state_dir",
                     R"(expected an absolute path, got "var/lib/canopy")");
}

TEST_CASE("log.level and log.format take their listed words", "[config]") {
    require_all_rejected({
        {"level verbose", with_sections(R"("log": {"level": "verbose"})"), "/log/level",
         R"(expected one of "trace", "debug", "info", "warn", "error", "critical", "off", got "verbose")"},
        {"level in capitals", with_sections(R"("log": {"level": "INFO"})"), "/log/level", R"(got "INFO")"},
        {"level number", with_sections(R"("log": {"level": 3})"), "/log/level", "got integer 3"},
        {"format json", with_sections(R"("log": {"format": "json"})"), "/log/format",
         R"(expected one of "auto", "text", "journal", got "json")"},
    });
}

TEST_CASE("preloads have a unique name of the node-name charset", "[config]") {
    const std::string weights = R"({"name": "w", "path": "/srv/w.bin", "backend": "fork_cow"})";
    require_all_rejected({
        {"not an object", with_sections(R"("preload": ["w"])"), "/preload/0", R"(expected an object, got string "w")"},
        {"no name", with_sections(R"("preload": [{"path": "/srv/w.bin", "backend": "fork_cow"}])"), "/preload/0/name",
         R"(missing required key "name")"},
        {"bad charset", with_sections(R"("preload": [{"name": "my weights", "path": "/w", "backend": "fork_cow"}])"),
         "/preload/0/name", R"(got "my weights")"},
        {"empty name", with_sections(R"("preload": [{"name": "", "path": "/w", "backend": "fork_cow"}])"),
         "/preload/0/name", "got 0 characters"},
        {"duplicate", with_sections(R"("preload": [)" + weights + ", " + weights + "]"), "/preload/1/name",
         R"(duplicate preload name "w" (also at /preload/0/name))"},
    });
}

TEST_CASE("a preload backend is fork_cow or fork_shm and must be given", "[config]") {
    require_all_rejected({
        {"missing", with_sections(R"("preload": [{"name": "w", "path": "/w"}])"), "/preload/0/backend",
         R"(missing required key "backend")"},
        {"unknown", with_sections(R"("preload": [{"name": "w", "path": "/w", "backend": "mmap"}])"),
         "/preload/0/backend", R"(expected "fork_cow" or "fork_shm", got "mmap")"},
    });
}

TEST_CASE("a fork_cow preload needs an absolute path and takes no bytes", "[config]") {
    require_all_rejected({
        {"no path", with_sections(R"("preload": [{"name": "w", "backend": "fork_cow"}])"), "/preload/0/path",
         R"(missing required key "path" (backend "fork_cow" maps a file))"},
        {"bytes", with_sections(R"("preload": [{"name": "w", "path": "/w", "bytes": 4, "backend": "fork_cow"}])"),
         "/preload/0/bytes", R"("bytes" is not allowed with backend "fork_cow")"},
        {"relative path", with_sections(R"("preload": [{"name": "w", "path": "w.bin", "backend": "fork_cow"}])"),
         "/preload/0/path", R"(expected an absolute path, got "w.bin")"},
    });
    // Existence is checked by the daemon at start, not here.
    const auto config = parse_config(
        with_sections(R"("preload": [{"name": "w", "path": "/nonexistent/w.bin", "backend": "fork_cow"}])"));
    REQUIRE(config.preload.size() == 1);
    CHECK(config.preload[0].path == std::filesystem::path("/nonexistent/w.bin"));
    CHECK(config.preload[0].bytes == 0);
}

TEST_CASE("a fork_shm preload needs bytes 1..2^40 and takes an optional absolute path", "[config]") {
    require_all_rejected({
        {"no bytes", with_sections(R"("preload": [{"name": "s", "backend": "fork_shm"}])"), "/preload/0/bytes",
         R"(missing required key "bytes")"},
        {"zero bytes", with_sections(R"("preload": [{"name": "s", "bytes": 0, "backend": "fork_shm"}])"),
         "/preload/0/bytes", "expected an integer from 1 to 1099511627776, got 0"},
        {"2^40 + 1 bytes",
         with_sections(R"("preload": [{"name": "s", "bytes": 1099511627777, "backend": "fork_shm"}])"),
         "/preload/0/bytes", "got 1099511627777"},
        {"relative path",
         with_sections(R"("preload": [{"name": "s", "bytes": 8, "path": "init.bin", "backend": "fork_shm"}])"),
         "/preload/0/path", "expected an absolute path"},
    });
    const auto config = parse_config(with_sections(
        R"("preload": [{"name": "s", "bytes": 1099511627776, "path": "/init.bin", "backend": "fork_shm"}])"));
    REQUIRE(config.preload.size() == 1);
    CHECK(config.preload[0].bytes == (std::uint64_t{1} << 40));
    CHECK(config.preload[0].path == std::filesystem::path("/init.bin"));
}

TEST_CASE("supervision values are bounded non-negative integers", "[config]") {
    require_all_rejected({
        {"restart_budget 1001", with_sections(R"("supervision": {"restart_budget": 1001})"),
         "/supervision/restart_budget", "expected an integer from 0 to 1000, got 1001"},
        {"restart_budget -1", with_sections(R"("supervision": {"restart_budget": -1})"), "/supervision/restart_budget",
         "got -1"},
        {"backoff_initial_ms 0", with_sections(R"("supervision": {"backoff_initial_ms": 0})"),
         "/supervision/backoff_initial_ms", "expected an integer from 1 to 2147483647, got 0"},
        {"drain_timeout_ms -1", with_sections(R"("supervision": {"drain_timeout_ms": -1})"),
         "/supervision/drain_timeout_ms", "from 0 to 2147483647, got -1"},
        {"task_timeout_ms too large", with_sections(R"("supervision": {"task_timeout_ms": 2147483648})"),
         "/supervision/task_timeout_ms", "got 2147483648"},
        {"task_timeout_ms string", with_sections(R"("supervision": {"task_timeout_ms": "0"})"),
         "/supervision/task_timeout_ms", R"(expected an integer, got string "0")"},
    });
}

TEST_CASE("backoff_max_ms is at least backoff_initial_ms", "[config]") {
    require_all_rejected({
        {"both given", with_sections(R"("supervision": {"backoff_initial_ms": 100, "backoff_max_ms": 50})"),
         "/supervision/backoff_max_ms", "expected at least backoff_initial_ms (100), got 50"},
        {"initial above the default max", with_sections(R"("supervision": {"backoff_initial_ms": 6000})"),
         "/supervision/backoff_initial_ms", "expected at most backoff_max_ms (5000, the default), got 6000"},
    });
    const auto config =
        parse_config(with_sections(R"("supervision": {"backoff_initial_ms": 70, "backoff_max_ms": 70})"));
    CHECK(config.supervision.backoff_initial == std::chrono::milliseconds(70));
    CHECK(config.supervision.backoff_max == std::chrono::milliseconds(70));
}

TEST_CASE("metrics.listen is HOST:PORT on a loopback host", "[config]") {
    require_all_rejected({
        {"no port", with_sections(R"("metrics": {"listen": "127.0.0.1"})"), "/metrics/listen",
         R"(expected "HOST:PORT", got "127.0.0.1")"},
        {"any address", with_sections(R"("metrics": {"listen": "0.0.0.0:9464"})"), "/metrics/listen",
         R"(expected a loopback host (127.x.x.x, [::1] or localhost), got "0.0.0.0")"},
        {"private address", with_sections(R"("metrics": {"listen": "10.0.0.1:80"})"), "/metrics/listen",
         R"(got "10.0.0.1")"},
        {"short IPv4 form", with_sections(R"("metrics": {"listen": "127.1:80"})"), "/metrics/listen", R"(got "127.1")"},
        {"IPv6 any", with_sections(R"("metrics": {"listen": "[::]:9464"})"), "/metrics/listen", R"(got "[::]")"},
        {"IPv6 without brackets", with_sections(R"("metrics": {"listen": "::1:9464"})"), "/metrics/listen",
         "expected a loopback host"},
        {"hostname", with_sections(R"("metrics": {"listen": "example.com:80"})"), "/metrics/listen",
         R"(got "example.com")"},
        {"port 0", with_sections(R"("metrics": {"listen": "127.0.0.1:0"})"), "/metrics/listen",
         R"(expected a port from 1 to 65535, got "0")"},
        {"port 65536", with_sections(R"("metrics": {"listen": "localhost:65536"})"), "/metrics/listen",
         R"(got "65536")"},
        {"port word", with_sections(R"("metrics": {"listen": "localhost:http"})"), "/metrics/listen", R"(got "http")"},
        {"signed port", with_sections(R"("metrics": {"listen": "localhost:+80"})"), "/metrics/listen", R"(got "+80")"},
        {"not a string", with_sections(R"("metrics": {"listen": 9464})"), "/metrics/listen",
         "expected a string, got integer 9464"},
    });
}

TEST_CASE("metrics.listen accepts every loopback form", "[config]") {
    using canopy::config::ListenAddress;
    CHECK(parse_config(with_sections(R"("metrics": {"listen": "127.0.0.1:9464"})")).metrics.listen ==
          ListenAddress{"127.0.0.1", 9464});
    CHECK(parse_config(with_sections(R"("metrics": {"listen": "127.8.9.10:1"})")).metrics.listen ==
          ListenAddress{"127.8.9.10", 1});
    CHECK(parse_config(with_sections(R"("metrics": {"listen": "[::1]:65535"})")).metrics.listen ==
          ListenAddress{"::1", 65535});
    CHECK(parse_config(with_sections(R"("metrics": {"listen": "localhost:80"})")).metrics.listen ==
          ListenAddress{"localhost", 80});
    CHECK_FALSE(parse_config(with_sections(R"("metrics": {})")).metrics.listen.has_value());
}

TEST_CASE("testing.fault_kernels is a boolean", "[config]") {
    require_all_rejected({
        {"string", with_sections(R"("testing": {"fault_kernels": "yes"})"), "/testing/fault_kernels",
         R"(expected a boolean, got string "yes")"},
        {"integer", with_sections(R"("testing": {"fault_kernels": 1})"), "/testing/fault_kernels",
         "expected a boolean, got integer 1"},
    });
    CHECK(parse_config(with_sections(R"("testing": {"fault_kernels": true})")).testing.fault_kernels);
}
