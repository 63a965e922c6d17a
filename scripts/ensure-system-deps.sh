#!/usr/bin/env bash
# Install the Debian packages the tests and the lab need, only those that are missing.
#   iproute2  ip netns / veth for the virtual lab      ethtool  turn veth offloads off
#   tcpdump   captures in lab tests                    tshark   dissects RoCE in probe tests
#   procps    pgrep/ps for process checks              openssh-client/-server  SSH probe runner tests
#   prometheus  `prometheus` and `promtool`: the exporter tests run a real server on loopback
#   VM hosts of the lab (roce.lab/rdma: rxe, lab/vmhost): qemu-system-x86 (TCG, no KVM here),
#   linux-image-amd64 (a kernel with rdma_rxe; the guest boots it), busybox-static (virtme-ng's
#   initramfs), rdma-core + ibverbs-utils (rdma link, libibverbs and the rxe provider),
#   perftest (ib_write_bw & co.)
set -euo pipefail
PACKAGES=(iproute2 ethtool tcpdump tshark procps openssh-client openssh-server openssl systemd prometheus
          qemu-system-x86 linux-image-amd64 busybox-static rdma-core ibverbs-utils perftest)
# Packages whose maintainer scripts start a daemon we do not want: the tests start their own.
NO_SERVICE_START=(prometheus)
missing=()
for package in "${PACKAGES[@]}"; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing+=("$package")
    fi
done
if [ ${#missing[@]} -eq 0 ]; then
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "missing Debian packages: ${missing[*]} (run as root to install them)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
echo "installing Debian packages: ${missing[*]}"
apt-get update -qq

plain=()
quiet=()
for package in "${missing[@]}"; do
    if [[ " ${NO_SERVICE_START[*]} " == *" $package "* ]]; then
        quiet+=("$package")
    else
        plain+=("$package")
    fi
done
if [ ${#plain[@]} -gt 0 ]; then
    apt-get install -y -qq --no-install-recommends "${plain[@]}" >/dev/null
fi
if [ ${#quiet[@]} -gt 0 ]; then
    # Debian's prometheus postinst runs `invoke-rc.d prometheus start || exit 1` (its sysvinit
    # script starts a server on :9090 when systemd is not PID 1, and a failed start fails the
    # install) and `deb-systemd-invoke start` under systemd. Both ask /usr/sbin/policy-rc.d
    # first; exit code 101 means "action forbidden" (Debian policy, invoke-rc.d(8)). Deny for
    # the length of this install only and put back whatever policy the machine had.
    policy=/usr/sbin/policy-rc.d
    saved=""
    if [ -e "$policy" ]; then
        saved="$(mktemp)"
        cp -p "$policy" "$saved"
    fi
    restore_policy() {
        if [ -n "$saved" ]; then
            mv -f "$saved" "$policy"
        else
            rm -f "$policy"
        fi
    }
    trap restore_policy EXIT
    printf '#!/bin/sh\n# ensure-system-deps.sh: no service starts while installing %s\nexit 101\n' \
        "${quiet[*]}" >"$policy"
    chmod 0755 "$policy"
    apt-get install -y -qq --no-install-recommends "${quiet[@]}" >/dev/null
    restore_policy
    trap - EXIT
fi
