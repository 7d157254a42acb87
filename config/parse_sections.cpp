// The small sections of the config document: control, log, supervision, metrics, serve and testing.

#include "config/detail/sections.h"
#include "config/detail/values.h"

#include <array>
#include <string>

namespace canopy::config::detail {
namespace {

constexpr std::array<std::string_view, 7> LOG_LEVEL_NAMES = {"trace", "debug",    "info", "warn",
                                                             "error", "critical", "off"};
constexpr std::array<LogLevel, 7> LOG_LEVELS = {LogLevel::TRACE, LogLevel::DEBUG,    LogLevel::INFO, LogLevel::WARN,
                                                LogLevel::ERROR, LogLevel::CRITICAL, LogLevel::OFF};
constexpr std::array<std::string_view, 3> LOG_FORMAT_NAMES = {"auto", "text", "journal"};
constexpr std::array<LogFormat, 3> LOG_FORMATS = {LogFormat::AUTO, LogFormat::TEXT, LogFormat::JOURNAL};

// backoff_max >= backoff_initial, reported at the key the file gives (backoff_max_ms when both are given).
void check_backoff(const ObjectReader& object, const SupervisionConfig& supervision) {
    if (supervision.backoff_max >= supervision.backoff_initial) {
        return;
    }
    const std::string initial = std::to_string(supervision.backoff_initial.count());
    const std::string max = std::to_string(supervision.backoff_max.count());
    if (const auto given_max = object.find("backoff_max_ms")) {
        given_max->fail("expected at least backoff_initial_ms (" + initial + "), got " + max);
    }
    object.require("backoff_initial_ms")
        .fail("expected at most backoff_max_ms (" + max + ", the default), got " + initial);
}

} // namespace

ControlConfig parse_control(const Field& field) {
    const ObjectReader object(field, {"socket", "allow_uids", "allow_gids", "admin_uids", "admin_gids",
                                      "max_frame_bytes", "task_history", "max_connections", "frame_timeout_ms",
                                      "idle_timeout_ms", "max_queued_reply_bytes", "max_attachment_bytes"});
    ControlConfig control;
    if (const auto socket = object.find("socket")) {
        control.socket = read_absolute_path(*socket, MAX_SOCKET_PATH_BYTES);
    }
    if (const auto uids = object.find("allow_uids")) {
        control.allow_uids = read_id_list(*uids);
    }
    if (const auto gids = object.find("allow_gids")) {
        control.allow_gids = read_id_list(*gids);
    }
    if (const auto uids = object.find("admin_uids")) {
        control.admin_uids = read_id_list(*uids);
    }
    if (const auto gids = object.find("admin_gids")) {
        control.admin_gids = read_id_list(*gids);
    }
    if (const auto frame = object.find("max_frame_bytes")) {
        control.max_frame_bytes = static_cast<std::uint32_t>(frame->integer(MIN_FRAME_BYTES, MAX_FRAME_BYTES));
    }
    if (const auto history = object.find("task_history")) {
        control.task_history = static_cast<std::uint32_t>(history->integer(1, MAX_TASK_HISTORY));
    }
    if (const auto connections = object.find("max_connections")) {
        control.max_connections = static_cast<std::uint32_t>(connections->integer(1, MAX_CONNECTIONS));
    }
    if (const auto frame = object.find("frame_timeout_ms")) {
        control.frame_timeout = read_duration(*frame, 1);
    }
    if (const auto idle = object.find("idle_timeout_ms")) {
        control.idle_timeout = read_duration(*idle, 1);
    }
    if (const auto queued = object.find("max_queued_reply_bytes")) {
        control.max_queued_reply_bytes =
            static_cast<std::uint64_t>(queued->integer(MIN_QUEUED_REPLY_BYTES, MAX_QUEUED_REPLY_BYTES));
    }
    if (const auto attachment = object.find("max_attachment_bytes")) {
        control.max_attachment_bytes = static_cast<std::uint64_t>(attachment->integer(0, MAX_ATTACHMENT_BYTES));
    }
    return control;
}

LogConfig parse_log(const Field& field) {
    const ObjectReader object(field, {"level", "format"});
    LogConfig log;
    if (const auto level = object.find("level")) {
        log.level = LOG_LEVELS[level->choice(LOG_LEVEL_NAMES)];
    }
    if (const auto format = object.find("format")) {
        log.format = LOG_FORMATS[format->choice(LOG_FORMAT_NAMES)];
    }
    return log;
}

SupervisionConfig parse_supervision(const Field& field) {
    const ObjectReader object(
        field, {"restart_budget", "backoff_initial_ms", "backoff_max_ms", "drain_timeout_ms", "task_timeout_ms"});
    SupervisionConfig supervision;
    if (const auto budget = object.find("restart_budget")) {
        supervision.restart_budget = static_cast<std::uint32_t>(budget->integer(0, MAX_RESTART_BUDGET));
    }
    if (const auto initial = object.find("backoff_initial_ms")) {
        supervision.backoff_initial = read_duration(*initial, 1);
    }
    if (const auto max = object.find("backoff_max_ms")) {
        supervision.backoff_max = read_duration(*max, 0);
    }
    if (const auto drain = object.find("drain_timeout_ms")) {
        supervision.drain_timeout = read_duration(*drain, 0);
    }
    if (const auto task = object.find("task_timeout_ms")) {
        supervision.task_timeout = read_duration(*task, 0);
    }
    check_backoff(object, supervision);
    return supervision;
}

MetricsConfig parse_metrics(const Field& field) {
    const ObjectReader object(field, {"listen", "max_connections", "timeout_ms"});
    MetricsConfig metrics;
    if (const auto listen = object.find("listen")) {
        metrics.listen = read_listen_address(*listen);
    }
    if (const auto connections = object.find("max_connections")) {
        metrics.max_connections = static_cast<std::uint32_t>(connections->integer(1, MAX_METRICS_CONNECTIONS));
    }
    if (const auto timeout = object.find("timeout_ms")) {
        metrics.timeout = read_duration(*timeout, 1);
    }
    return metrics;
}

ServeConfig parse_serve(const Field& field) {
    const ObjectReader object(field, {"listen", "tls", "lost_after_ms"});
    ServeConfig serve;
    serve.listen = read_net_address(object.require("listen"));
    serve.tls = read_tls(object.require("tls"));
    if (const auto lost_after = object.find("lost_after_ms")) {
        serve.lost_after = read_lost_after(*lost_after);
    }
    return serve;
}

TestingConfig parse_testing(const Field& field) {
    const ObjectReader object(field, {"fault_kernels", "insecure_peers"});
    TestingConfig testing;
    if (const auto fault_kernels = object.find("fault_kernels")) {
        testing.fault_kernels = fault_kernels->boolean();
    }
    if (const auto insecure_peers = object.find("insecure_peers")) {
        testing.insecure_peers = insecure_peers->boolean();
    }
    return testing;
}

} // namespace canopy::config::detail
