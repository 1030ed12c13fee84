#!/bin/sh
# Installs what RunLoopKit and its tests need when it is missing: libzmq (headers and
# library) and Python 3 with pyzmq, for the test of a peer written in another language.
#
# Debian and Ubuntu: apt-get (libzmq3-dev python3 python3-zmq). Fedora, RHEL and its
# rebuilds, Amazon Linux: dnf, or yum where dnf is missing (zeromq-devel python3
# python3-zmq; RHEL and its rebuilds take them from EPEL). The system is told by
# /etc/os-release (ID, then ID_LIKE), else by the package manager present. Elsewhere it
# says what to install and exits with 2. Root runs the package manager directly; anyone
# else goes through sudo. RUNLOOPKIT_OS_RELEASE names another os-release file (tests).
set -eu

os_release=${RUNLOOPKIT_OS_RELEASE:-/etc/os-release}

# The system's family, "debian" or "fedora", from os-release, else from the package
# manager present; empty if neither tells.
family() {
    ids=""
    if [ -r "$os_release" ]; then
        # shellcheck disable=SC1090 # os-release is shell variable assignments by definition
        ids=$(. "$os_release" && echo "${ID:-} ${ID_LIKE:-}")
    fi
    for id in $ids; do
        case "$id" in
            debian | ubuntu) echo debian; return ;;
            fedora | rhel | centos | rocky | almalinux | amzn | ol) echo fedora; return ;;
        esac
    done
    if command -v apt-get >/dev/null 2>&1; then echo debian; return; fi
    if command -v dnf >/dev/null 2>&1 || command -v yum >/dev/null 2>&1; then echo fedora; return; fi
    echo ""
}

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi

case "$(family)" in
    debian)
        packages="libzmq3-dev python3 python3-zmq"
        missing=""
        for package in $packages; do
            if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
                missing="$missing $package"
            fi
        done
        [ -z "$missing" ] && exit 0
        echo "Installing$missing (RunLoopKit's ZeroMQ dependency and its test peer's Python) with apt-get..." >&2
        $SUDO apt-get update -qq
        # shellcheck disable=SC2086 # one word per package
        DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
        ;;
    fedora)
        packages="zeromq-devel python3 python3-zmq"
        missing=""
        for package in $packages; do
            if ! rpm -q "$package" >/dev/null 2>&1; then
                missing="$missing $package"
            fi
        done
        [ -z "$missing" ] && exit 0
        if command -v dnf >/dev/null 2>&1; then manager=dnf; else manager=yum; fi
        echo "Installing$missing (RunLoopKit's ZeroMQ dependency and its test peer's Python) with $manager..." >&2
        # shellcheck disable=SC2086 # one word per package
        if ! $SUDO "$manager" install -y -q $missing >/dev/null; then
            echo "$manager could not install$missing. On RHEL, CentOS Stream, Rocky or AlmaLinux they" >&2
            echo "come from EPEL: enable it (for example: $manager install epel-release) and run this again." >&2
            exit 1
        fi
        ;;
    *)
        cat >&2 <<'EOF'
This system is neither Debian/Ubuntu (apt-get) nor Fedora/RHEL/Amazon Linux (dnf, yum).
Install with its package manager, then build again:
  - libzmq 4.3 or later with its headers (zmq.h) and library (libzmq.so): the package
    is named zeromq, zeromq-dev or zeromq-devel, depending on the distribution
  - for the tests only, Python 3 with pyzmq (the distribution's package, or pip install pyzmq)
EOF
        exit 2
        ;;
esac
