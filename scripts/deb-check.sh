#!/usr/bin/env bash
# The Debian package on a fresh Debian 12: builds the .deb from a configured build (cmake/CanopyPackage.cmake),
# makes a bookworm chroot with debootstrap (minbase, plus systemd and udev), installs the package there with apt-get,
# which pulls its dependencies, and checks what the package promises:
#   - the system user canopy, home /var/lib/canopy, no login shell, in group video (and render when it exists);
#   - /etc/canopy/canopy.json, registered as a conffile;
#   - `systemd-analyze verify` of the installed unit prints nothing;
#   - postinst enabled the unit, and `systemctl enable`/`disable` work offline;
#   - canopyd runs as canopy with the shipped config (in the directories the unit's RuntimeDirectory= and
#     StateDirectory= give it, /proc and a /dev/shm tmpfs mounted), its workers too; root's `canopy status`,
#     a task, `canopy worker restart` and `canopy shutdown` work, another uid is refused;
#   - `apt-get remove` keeps the conffile, `dpkg --purge` removes the rest and keeps the user;
#   - then, with systemd as PID 1 (the chroot booted with systemd-nspawn): installing the package starts the
#     unit, which runs canopyd as canopy and answers root's `canopy status`; `systemctl disable --now`,
#     `enable --now` and `restart` work; purging the package stops it.
#
# Not run by CI: it needs root, network (deb.debian.org) and a few minutes. docs/operations.md records the last
# run. Usage: scripts/deb-check.sh [BUILD_DIR] (default: build). Debian's base system, once downloaded, is kept in
# BUILD_DIR/deb-check/bookworm-minbase.tgz; the chroot, BUILD_DIR/deb-check/bookworm, is made afresh from it on
# every run.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
work=$build/deb-check
tarball=$work/bookworm-minbase.tgz
target=$work/bookworm
mirror=http://deb.debian.org/debian
wants=/etc/systemd/system/multi-user.target.wants/canopyd.service
unit=/usr/lib/systemd/system/canopyd.service
daemon_pid=

step() { echo "deb-check: $*"; }
fail() {
    echo "deb-check: FAILED: $*" >&2
    exit 1
}
in_root() { chroot "$target" "$@"; }

unmount_all() {
    for m in dev/shm proc; do
        if mountpoint -q "$target/$m"; then
            umount "$target/$m"
        fi
    done
}
cleanup() {
    if [ -n "$daemon_pid" ] && kill -0 "$daemon_pid" 2>/dev/null; then
        kill "$daemon_pid" || true
        wait "$daemon_pid" || true
    fi
    unmount_all
}
trap cleanup EXIT

if [ "$(id -u)" -ne 0 ]; then
    echo "deb-check: needs root (debootstrap, chroot, mount)" >&2
    exit 2
fi
command -v debootstrap >/dev/null || apt-get install -y -qq debootstrap
command -v systemd-nspawn >/dev/null || apt-get install -y -qq systemd-container

step "building the package"
cmake --build "$build" --target canopyd canopy >/dev/null
rm -rf "$work/package"
cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/package" >/dev/null
debs=("$work"/package/canopy_*.deb)
deb=${debs[0]}
[ -f "$deb" ] || fail "cpack made no canopy_*.deb"
step "made $(basename "$deb"): $(dpkg-deb -f "$deb" Depends)"

if [ ! -f "$tarball" ]; then
    step "downloading Debian 12's base system into $tarball"
    mkdir -p "$work"
    debootstrap --variant=minbase --include=systemd --make-tarball="$tarball" bookworm "$work/download" "$mirror"
    rm -rf "$work/download"
fi
step "a fresh bookworm chroot in $target"
unmount_all
if [ -d "$target" ] && findmnt -rn -o TARGET | grep -q "^$target"; then
    fail "something is still mounted under $target"
fi
rm -rf "$target"
debootstrap --variant=minbase --include=systemd --unpack-tarball="$tarball" bookworm "$target" "$mirror" >/dev/null
mount -t proc proc "$target/proc"
mount -t tmpfs -o mode=1777,nosuid,nodev tmpfs "$target/dev/shm"

step "apt-get install ./$(basename "$deb")"
cp "$deb" "$target/tmp/"
in_root apt-get update -qq
# udev, as on a real host: it makes the render group that owns /dev/dri/renderD*.
DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq udev >"$work/apt.log" 2>&1 ||
    fail "apt-get install udev: $(tail -n 20 "$work/apt.log")"
DEBIAN_FRONTEND=noninteractive in_root apt-get install -y -qq "/tmp/$(basename "$deb")" >>"$work/apt.log" 2>&1 ||
    fail "apt-get install: $(tail -n 20 "$work/apt.log")"

step "the canopy user and its groups"
passwd=$(in_root getent passwd canopy) || fail "no user canopy"
IFS=: read -r _ _ canopy_uid _ _ home shell <<<"$passwd"
[ "$home" = /var/lib/canopy ] || fail "canopy's home is $home"
[ "$shell" = /usr/sbin/nologin ] || fail "canopy's shell is $shell"
[ "$canopy_uid" -lt 1000 ] || fail "canopy is uid $canopy_uid, not a system user"
groups=" $(in_root id -nG canopy) "
[[ $groups == *" canopy "* && $groups == *" video "* ]] || fail "canopy is in$groups"
if in_root getent group render >/dev/null; then
    [[ $groups == *" render "* ]] || fail "render exists but canopy is in$groups"
fi
step "  $passwd; groups:$groups"

step "the conffile"
[ -f "$target/etc/canopy/canopy.json" ] || fail "no /etc/canopy/canopy.json"
# shellcheck disable=SC2016 # dpkg-query's own ${field} syntax
in_root dpkg-query -W -f='${Conffiles}' canopy | grep -q '^ /etc/canopy/canopy.json ' ||
    fail "/etc/canopy/canopy.json is not a conffile"

step "systemd-analyze verify $unit"
verify=$(in_root systemd-analyze verify "$unit" 2>&1) || fail "systemd-analyze verify: $verify"
[ -z "$verify" ] || fail "systemd-analyze verify: $verify"

step "enabled by postinst; systemctl disable and enable offline"
[ -L "$target$wants" ] || fail "postinst did not enable canopyd.service"
in_root systemctl disable canopyd.service 2>/dev/null
[ ! -e "$target$wants" ] || fail "systemctl disable left $wants"
in_root systemctl enable canopyd.service 2>/dev/null
[ -L "$target$wants" ] || fail "systemctl enable made no $wants"
[ "$(in_root systemctl is-enabled canopyd.service)" = enabled ] || fail "not enabled"

step "canopyd as canopy with /etc/canopy/canopy.json"
# What RuntimeDirectory=canopy and StateDirectory=canopy give the unit before ExecStartPre.
in_root install -d -o canopy -g canopy -m 0755 /run/canopy
[ "$(in_root stat -c %U:%a /var/lib/canopy)" = canopy:700 ] || fail "/var/lib/canopy is not canopy's, mode 700"
in_root runuser -u canopy -- canopyd --check-config --config /etc/canopy/canopy.json >/dev/null
chroot "$target" runuser -u canopy -- canopyd --config /etc/canopy/canopy.json >"$work/canopyd.log" 2>&1 &
daemon_pid=$!
for _ in $(seq 100); do
    if in_root canopy status >/dev/null 2>&1; then
        break
    fi
    sleep 0.1
done
in_root canopy status || fail "canopy status as root: $(cat "$work/canopyd.log")"
pids=$(in_root canopy --json status | sed -n 's/^ *"pid": \([0-9][0-9]*\),\{0,1\}$/\1/p')
video_gid=$(in_root getent group video | cut -d: -f3)
for pid in $pids; do
    read -r _ real effective _ < <(grep '^Uid:' "/proc/$pid/status")
    if [ "$real" != "$canopy_uid" ] || [ "$effective" != "$canopy_uid" ]; then
        fail "pid $pid runs as uid $real/$effective"
    fi
    grep -q "^Groups:.*\b$video_gid\b" "/proc/$pid/status" || fail "pid $pid is not in group video"
done
step "  $(echo "$pids" | wc -w) processes, every one uid $canopy_uid (canopy), group video among its groups"
id=$(in_root canopy -q buffer create --bytes 4096)
in_root canopy submit fill --on chip0 --out "$id:float32:1024" --scalar float32:1.5 --wait >/dev/null ||
    fail "a task on chip0"
# The chroot's /dev/shm is its own tmpfs: everything in it is the daemon's.
[ "$(stat -c %u "$target"/dev/shm/* | sort -u)" = "$canopy_uid" ] || fail "/dev/shm holds objects not canopy's"
in_root canopy worker restart sub0 >/dev/null || fail "canopy worker restart as root"
if refused=$(in_root runuser -u nobody -- canopy status 2>&1); then
    fail "uid nobody may use the daemon"
fi
[[ $refused == *UNAUTHORIZED* ]] || fail "uid nobody: $refused"
in_root canopy shutdown || fail "canopy shutdown as root"
status=0
wait "$daemon_pid" || status=$?
daemon_pid=
[ "$status" -eq 0 ] || fail "canopyd exited $status: $(cat "$work/canopyd.log")"
if compgen -G "$target/dev/shm/*" >/dev/null; then
    fail "canopyd left $(ls "$target/dev/shm") in /dev/shm"
fi

step "apt-get remove keeps the conffile; dpkg --purge removes the rest, not the user"
DEBIAN_FRONTEND=noninteractive in_root apt-get remove -y -qq canopy >>"$work/apt.log" 2>&1 || fail "apt-get remove"
[ -f "$target/etc/canopy/canopy.json" ] || fail "remove deleted the conffile"
[ ! -e "$target$unit" ] || fail "remove left the unit"
in_root dpkg --purge canopy >>"$work/apt.log" 2>&1 || fail "dpkg --purge"
for gone in /etc/canopy /var/lib/canopy "$wants" /usr/bin/canopyd; do
    [ ! -e "$target$gone" ] || fail "purge left $gone"
done
in_root getent passwd canopy >/dev/null || fail "purge removed the user"
# shellcheck disable=SC2016
if in_root dpkg-query -W -f='${Status}\n' canopy 2>/dev/null | grep -qx 'install ok installed'; then
    fail "dpkg still lists canopy"
fi

step "booting the chroot with systemd-nspawn: the package under systemd as PID 1"
unmount_all
cp "$deb" "$target/root/canopy.deb" # the booted container has a tmpfs on /tmp
cat >"$target/root/boot-check.sh" <<'EOF'
#!/bin/sh
# Runs as a oneshot unit inside the booted container; deb-check.sh reads its output, /root/boot-check.log.
set -eux
[ "$(cat /proc/1/comm)" = systemd ]
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq /root/canopy.deb
[ "$(systemctl is-active canopyd.service)" = active ]
[ "$(systemctl show -p User --value canopyd.service)" = canopy ]
pid=$(systemctl show -p MainPID --value canopyd.service)
grep "^Uid:" "/proc/$pid/status" | grep -q "^Uid:[[:space:]]*$(id -u canopy)[[:space:]]"
canopy status
systemctl disable --now canopyd.service
[ "$(systemctl is-active canopyd.service)" != active ]
systemctl enable --now canopyd.service
[ "$(systemctl is-active canopyd.service)" = active ]
systemctl restart canopyd.service
canopy status
DEBIAN_FRONTEND=noninteractive apt-get purge -y -qq canopy
[ "$(systemctl is-active canopyd.service)" != active ]
journalctl -b -u canopyd.service --no-pager -o cat >/root/canopyd-journal.log
EOF
chmod 755 "$target/root/boot-check.sh"
cat >"$target/etc/systemd/system/boot-check.service" <<'EOF'
[Unit]
Description=deb-check: the canopy package under systemd
After=basic.target
[Service]
Type=oneshot
ExecStart=/bin/sh -c '/root/boot-check.sh >/root/boot-check.log 2>&1; echo "boot-check exit $?" >>/root/boot-check.log'
ExecStartPost=/usr/bin/systemctl poweroff --no-block
[Install]
WantedBy=multi-user.target
EOF
in_root systemctl enable boot-check.service 2>/dev/null
rm -f "$target/root/boot-check.log"
timeout 300 systemd-nspawn -q --register=no --keep-unit -D "$target" -b >"$work/nspawn.log" 2>&1 || true
[ -f "$target/root/boot-check.log" ] || fail "the booted container ran no check: $(tail -n 20 "$work/nspawn.log")"
grep -q "^boot-check exit 0$" "$target/root/boot-check.log" ||
    fail "under systemd: $(tail -n 30 "$target/root/boot-check.log")"
journal=$target/root/canopyd-journal.log
[ "$(grep -c '^ready: ' "$journal")" -eq 3 ] || fail "the unit did not start three times: $(cat "$journal")"
grep -q '^canopyd.service: Deactivated successfully.$' "$journal" || fail "the unit did not stop: $(cat "$journal")"
step "  $(grep -c '^+ ' "$target/root/boot-check.log") commands passed; the end of the unit's journal:"
tail -n 6 "$journal" | sed 's/^/deb-check:     /'

step "OK: $(basename "$deb") on Debian $(cat "$target/etc/debian_version")"
