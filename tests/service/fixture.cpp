#include "fixture.h"

#include "ipc/fd_passing.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <signal.h>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

namespace canopy::e2e {
namespace {

using nlohmann::json;

std::string read_all(int fd) {
    std::string out;
    char buf[65536];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return out;
        }
        out.append(buf, static_cast<std::size_t>(n));
    }
}

} // namespace

TempDir::TempDir() {
    char tmpl[] = "/tmp/canopy-e2e-XXXXXX";
    path = ::mkdtemp(tmpl);
    std::filesystem::permissions(path, std::filesystem::perms::all); // reachable by another uid too
}

TempDir::~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
}

json e2e_config(int sim_chips, int subs, const json& extra) {
    json chips = json::array();
    for (int i = 0; i < sim_chips; ++i) {
        chips.push_back({{"device", i}, {"backend", "sim"}});
    }
    json config = {{"node", {{"name", "e2e"}, {"level", 3}, {"chips", chips}, {"subs", subs}}},
                   {"supervision", {{"backoff_initial_ms", 10}, {"backoff_max_ms", 200}, {"drain_timeout_ms", 5000}}},
                   {"testing", {{"fault_kernels", true}}},
                   {"log", {{"level", "debug"}}}};
    for (const auto& [key, value] : extra.items()) {
        config[key] = value;
    }
    return config;
}

json Output::json() const {
    return json::parse(out);
}

namespace {

// NUL-terminated strings and the null-terminated array of pointers to them that exec takes.
class ExecStrings {
public:
    explicit ExecStrings(std::vector<std::string> strings) : strings_(std::move(strings)) {
        for (std::string& s : strings_) {
            pointers_.push_back(s.data());
        }
        pointers_.push_back(nullptr);
    }
    char* const* data() const noexcept { return pointers_.data(); }

private:
    std::vector<std::string> strings_;
    std::vector<char*> pointers_;
};

// This process's environment with `env` set over it, for execve. Built before a fork: the child of a process
// with other threads (a test's gRPC server among them) must not allocate, since another thread may have held the
// allocator's lock at the fork, and setenv allocates.
ExecStrings child_environment(const std::map<std::string, std::string>& env) {
    std::vector<std::string> entries;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view entry(*e);
        if (!env.contains(std::string(entry.substr(0, entry.find('='))))) {
            entries.emplace_back(entry);
        }
    }
    for (const auto& [k, v] : env) {
        entries.push_back(k + "=" + v);
    }
    return ExecStrings(std::move(entries));
}

} // namespace

Output run_program(const std::string& program, const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env, std::optional<uid_t> as_uid,
                   std::chrono::seconds limit) {
    int out_pipe[2];
    int err_pipe[2];
    if (::pipe2(out_pipe, O_CLOEXEC) != 0 || ::pipe2(err_pipe, O_CLOEXEC) != 0) {
        throw std::runtime_error("pipe failed");
    }
    std::vector<std::string> words{program};
    words.insert(words.end(), args.begin(), args.end());
    const ExecStrings argv(std::move(words));
    const ExecStrings envp = child_environment(env);
    const pid_t pid = ::fork();
    if (pid < 0) {
        throw std::runtime_error("fork failed");
    }
    if (pid == 0) {
        // System calls only from here to the exec (child_environment).
        ::dup2(out_pipe[1], 1);
        ::dup2(err_pipe[1], 2);
        if (as_uid) {
            if (::setgid(*as_uid) != 0 || ::setuid(*as_uid) != 0) {
                ::_exit(120);
            }
        }
        ::execve(program.c_str(), argv.data(), envp.data());
        ::_exit(127);
    }
    ::close(out_pipe[1]);
    ::close(err_pipe[1]);
    Output o;
    std::thread err_reader([&] { o.err = read_all(err_pipe[0]); });
    o.out = read_all(out_pipe[0]);
    err_reader.join();
    ::close(out_pipe[0]);
    ::close(err_pipe[0]);
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    o.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return o;
}

namespace {

// The binaries the tests run: the ones built with them, or those CANOPY_E2E_CANOPYD and CANOPY_E2E_CANOPY name
// (a benchmark carried to another machine with its binaries).
const char* daemon_path() {
    const char* given = std::getenv("CANOPY_E2E_CANOPYD");
    return given != nullptr ? given : CANOPYD_PATH;
}

} // namespace

std::string cli_binary() {
    const char* given = std::getenv("CANOPY_E2E_CANOPY");
    return given != nullptr ? given : CANOPY_PATH;
}

Daemon::Daemon(const json& config, const std::map<std::string, std::string>& env,
               const std::function<bool()>& in_child) {
    socket_ = (dir_.path / "canopy.sock").string();
    const auto config_path = dir_.path / "canopy.json";
    std::ofstream(config_path) << config.dump(2);
    const auto log_path = dir_.path / "canopyd.log";
    const std::string daemon_binary = daemon_path();
    const ExecStrings argv({daemon_binary, "--config", config_path.string(), "--socket", socket_, "--state-dir",
                            (dir_.path / "state").string()});
    const ExecStrings envp = child_environment(env);
    pid_ = ::fork();
    if (pid_ == 0) {
        // System calls only from here to the exec (child_environment); in_child keeps to them too.
        const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        ::dup2(log, 2);
        ::dup2(log, 1);
        if (in_child && !in_child()) {
            ::_exit(126);
        }
        ::execve(daemon_binary.c_str(), argv.data(), envp.data());
        ::_exit(127);
    }
    for (int i = 0; i < 400; ++i) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
            pid_ = -1;
            throw std::runtime_error("canopyd exited during start-up:\n" + log());
        }
        // status exits 1 while a worker is not running (a remote node whose host is down): it answered all the same.
        const auto answered = [](const Output& o) {
            return o.rc == 0 || (o.rc == 1 && o.out.find("canopyd pid") != std::string::npos);
        };
        if (std::filesystem::exists(socket_) && answered(cli({"status"}))) {
            return;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    // The daemon is not left behind: the constructor throws, so no destructor stops it.
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
    pid_ = -1;
    throw std::runtime_error("canopyd did not answer within 20 s:\n" + log());
}

Daemon::~Daemon() {
    stop();
}

int Daemon::reaped(int status) {
    pid_ = -1;
    if (WIFSIGNALED(status)) {
        // A daemon killed by a signal (a test's SIGKILL, or stop()'s) could not unlink its shm objects. Its journals
        // (its own and its nested nodes', each a directory with one file per object: daemon/journal.h) name them, as
        // they would for the daemon's next start on the same state dir, and that dir goes with the test: unlink them
        // here, so that the machine keeps nothing of the test.
        std::error_code ec;
        for (auto it = std::filesystem::recursive_directory_iterator(dir_.path / "state", ec);
             !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
            if (it->is_regular_file() && it->path().parent_path().filename() == "journal") {
                ::shm_unlink(("/" + it->path().filename().string()).c_str());
            }
        }
    }
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int Daemon::stop() {
    if (pid_ <= 0) {
        return -1;
    }
    ::kill(pid_, SIGTERM);
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid_, SIGKILL);
            ::waitpid(pid_, &status, 0);
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return reaped(status);
}

std::optional<int> Daemon::wait_exit(std::chrono::milliseconds limit) {
    if (pid_ <= 0) {
        return std::nullopt;
    }
    const auto deadline = std::chrono::steady_clock::now() + limit;
    int status = 0;
    while (::waitpid(pid_, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            return std::nullopt;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return reaped(status);
}

std::string Daemon::log() const {
    std::ifstream in(dir_.path / "canopyd.log");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

Output Daemon::cli(const std::vector<std::string>& args, std::optional<uid_t> as_uid) const {
    std::vector<std::string> full = args;
    full.push_back("--socket");
    full.push_back(socket_);
    return run_program(cli_binary(), full, {}, as_uid);
}

json Daemon::cli_json(const std::vector<std::string>& args) const {
    std::vector<std::string> full = args;
    full.push_back("--json");
    const Output o = cli(full);
    try {
        return o.json();
    } catch (const std::exception&) {
        throw std::runtime_error("canopy output is not JSON (rc " + std::to_string(o.rc) + "): " + o.out + o.err);
    }
}

std::string Daemon::create_buffer(std::uint64_t bytes, const std::string& access) const {
    const json b = cli_json({"buffer", "create", "--bytes", std::to_string(bytes), "--access", access});
    return b.at("id").get<std::string>();
}

RawClient::RawClient(const std::string& socket) {
    fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, socket.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        throw std::runtime_error("connect " + socket + ": " + std::strerror(errno));
    }
}

RawClient::~RawClient() {
    ::close(fd_);
}

void RawClient::send_bytes(const std::string& bytes) {
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::send(fd_, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
        if (n <= 0) {
            return; // the daemon closed the connection
        }
        done += static_cast<std::size_t>(n);
    }
}

void RawClient::send_frame(const std::string& body) {
    std::string frame(4, '\0');
    const auto len = static_cast<std::uint32_t>(body.size());
    for (int i = 0; i < 4; ++i) {
        frame[static_cast<std::size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
    }
    send_bytes(frame + body);
}

bool RawClient::read_exact(char* p, std::size_t n, std::chrono::milliseconds limit) {
    std::size_t done = 0;
    while (done < n) {
        pollfd pfd{fd_, POLLIN, 0};
        if (::poll(&pfd, 1, static_cast<int>(limit.count())) <= 0) {
            return false;
        }
        // recvmsg: a reply may carry fds (buffer.fd), which arrive with its first byte and are kept.
        std::size_t r = 0;
        try {
            r = canopy::ipc::recv_message(fd_, std::as_writable_bytes(std::span(p + done, n - done)), fds_);
        } catch (const std::exception&) {
            return false; // a reset connection
        }
        if (r == 0) {
            return false;
        }
        done += r;
    }
    return true;
}

std::optional<json> RawClient::read_reply(std::chrono::milliseconds limit) {
    unsigned char header[4];
    if (!read_exact(reinterpret_cast<char*>(header), 4, limit)) {
        return std::nullopt;
    }
    const std::uint32_t len = std::uint32_t{header[0]} | std::uint32_t{header[1]} << 8 |
                              std::uint32_t{header[2]} << 16 | std::uint32_t{header[3]} << 24;
    std::string body(len, '\0');
    if (!read_exact(body.data(), len, limit)) {
        return std::nullopt;
    }
    return json::parse(body);
}

std::optional<std::string> RawClient::read_bytes(std::size_t n, std::chrono::milliseconds limit) {
    std::string bytes(n, '\0');
    if (!read_exact(bytes.data(), n, limit)) {
        return std::nullopt;
    }
    return bytes;
}

json RawClient::request(const json& body) {
    send_frame(body.dump());
    auto reply = read_reply();
    if (!reply) {
        throw std::runtime_error("the daemon closed the connection");
    }
    return *reply;
}

void RawClient::close_write() {
    ::shutdown(fd_, SHUT_WR);
}

bool RawClient::closed_by_peer(std::chrono::milliseconds limit) {
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(limit.count())) <= 0) {
        return false;
    }
    char c;
    const ssize_t n = ::recv(fd_, &c, 1, MSG_PEEK);
    return n == 0 || (n < 0 && errno == ECONNRESET); // a reset: closed with bytes of ours still unread
}

std::string wait_task_started(const Daemon& d, const std::string& name, std::chrono::milliseconds limit) {
    RawClient c(d.socket());
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        const json listing = c.request({{"op", "tasks"}});
        for (const auto& t : listing.at("tasks")) {
            if (t.at("name") == name && t.at("state") != "queued") {
                return t.at("state").get<std::string>();
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return "";
}

} // namespace canopy::e2e
