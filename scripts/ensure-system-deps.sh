#!/usr/bin/env bash
# Install the Debian packages the tests and the lab need, only those that are missing.
#   iproute2  ip netns / veth for the virtual lab      ethtool  turn veth offloads off
#   tcpdump   captures in lab tests                    tshark   dissects RoCE in probe tests
#   procps    pgrep/ps for process checks              openssh-client/-server  SSH probe runner tests
set -euo pipefail
PACKAGES=(iproute2 ethtool tcpdump tshark procps openssh-client openssh-server)
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
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
