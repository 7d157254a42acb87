// describe: the human-readable summary printed by canopyd --check-config.

#include "config/config.h"
#include "config/detail/worker_tree.h"

#include <sstream>

namespace canopy::config {
namespace {

std::string node_label(const NodeConfig& node) {
    return "node \"" + node.name + "\", level " + std::to_string(node.level);
}

std::string ms(std::chrono::milliseconds duration) {
    return std::to_string(duration.count()) + " ms";
}

std::string tls_label(const TlsConfig& tls) {
    return tls.insecure ? "tls insecure" : "tls peer " + tls.peer_name;
}

std::string remote_label(const RemoteConfig& remote) {
    return "remote node at " + to_string(remote.address) + ", " + tls_label(remote.tls) + ", lost after " +
           ms(remote.lost_after);
}

std::string worker_label(const detail::WorkerEntry& entry) {
    if (entry.chip != nullptr) {
        return std::string(to_string(entry.chip->backend)) + " device " + std::to_string(entry.chip->device);
    }
    if (entry.node == nullptr) {
        return "sub";
    }
    return entry.node->remote ? remote_label(*entry.node->remote) : node_label(*entry.node);
}

std::string join_ids(const std::vector<std::uint32_t>& ids) {
    if (ids.empty()) {
        return "none";
    }
    std::string text;
    for (const std::uint32_t id : ids) {
        text += (text.empty() ? "" : ", ") + std::to_string(id);
    }
    return text;
}

std::string preload_label(const PreloadConfig& preload) {
    std::string text = preload.name + ": " + std::string(to_string(preload.backend));
    if (preload.backend == PreloadBackend::FORK_SHM) {
        text += ", " + std::to_string(preload.bytes) + " bytes";
    }
    if (preload.path) {
        text += (preload.backend == PreloadBackend::FORK_COW ? ", file " : ", initial contents from ") +
                preload.path->string();
    }
    return text;
}

void describe_workers(std::ostream& out, const NodeConfig& root) {
    out << "workers:\n";
    out << "  / (" << node_label(root) << ")\n";
    for (const detail::WorkerEntry& entry : detail::list_workers(root)) {
        out << "  " << entry.path << " (" << worker_label(entry) << ")\n";
    }
}

void describe_control(std::ostream& out, const ControlConfig& control) {
    out << "control socket: " << control.socket.string() << "\n";
    out << "  allowed uids besides the daemon's own: " << join_ids(control.allow_uids) << "\n";
    out << "  allowed gids: " << join_ids(control.allow_gids) << "\n";
    out << "  admin uids besides the daemon's own: " << join_ids(control.admin_uids) << "\n";
    out << "  admin gids: " << join_ids(control.admin_gids) << "\n";
    out << "  max frame: " << control.max_frame_bytes << " bytes\n";
    out << "  finished tasks remembered: " << control.task_history << "\n";
    out << "  connections: at most " << control.max_connections << ", frame timeout " << ms(control.frame_timeout)
        << ", idle timeout " << ms(control.idle_timeout) << ", reply budget " << control.max_queued_reply_bytes
        << " bytes\n";
    out << "  largest attachment: " << control.max_attachment_bytes << " bytes\n";
}

void describe_preloads(std::ostream& out, const std::vector<PreloadConfig>& preloads) {
    out << "preload:" << (preloads.empty() ? " none" : "") << "\n";
    for (const PreloadConfig& preload : preloads) {
        out << "  " << preload_label(preload) << "\n";
    }
}

void describe_supervision(std::ostream& out, const SupervisionConfig& supervision) {
    out << "supervision: restart budget " << supervision.restart_budget << ", backoff "
        << ms(supervision.backoff_initial) << " to " << ms(supervision.backoff_max) << ", drain timeout "
        << ms(supervision.drain_timeout) << ", task timeout "
        << (supervision.task_timeout.count() == 0 ? std::string("none") : ms(supervision.task_timeout)) << "\n";
}

std::string tls_files(const TlsConfig& tls) {
    return "tls files: ca " + tls.ca.string() + ", cert " + tls.cert.string() + ", key " + tls.key.string();
}

// Each link between hosts that uses TLS names its files on a line of its own.
void describe_links(std::ostream& out, const Config& config) {
    for (const NodeConfig& nested : config.node.nodes) {
        if (nested.remote && !nested.remote->tls.insecure) {
            out << "remote node " << nested.name << ": " << tls_files(nested.remote->tls) << "\n";
        }
    }
    if (!config.serve) {
        out << "serve: off\n";
        return;
    }
    out << "serve: listen on " << to_string(config.serve->listen) << ", " << tls_label(config.serve->tls)
        << ", lost after " << ms(config.serve->lost_after) << "\n";
    if (!config.serve->tls.insecure) {
        out << "  " << tls_files(config.serve->tls) << "\n";
    }
}

} // namespace

std::string describe(const Config& config) {
    std::ostringstream out;
    describe_workers(out, config.node);
    describe_control(out, config.control);
    out << "state dir: " << config.state_dir.string() << "\n";
    out << "log: level " << to_string(config.log.level) << ", format " << to_string(config.log.format) << "\n";
    describe_preloads(out, config.preload);
    describe_supervision(out, config.supervision);
    out << "metrics: "
        << (config.metrics.listen ? "listen on " + to_string(*config.metrics.listen) + ", at most " +
                                        std::to_string(config.metrics.max_connections) + " connections, timeout " +
                                        ms(config.metrics.timeout)
                                  : std::string("off"))
        << "\n";
    describe_links(out, config);
    out << "testing: fault kernels " << (config.testing.fault_kernels ? "on" : "off") << ", insecure peers "
        << (config.testing.insecure_peers ? "on" : "off") << "\n";
    return out.str();
}

} // namespace canopy::config
