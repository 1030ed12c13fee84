#!/bin/sh
# Installs what RunLoopKit and its tests need from Debian when it is missing: libzmq
# (headers and library) and Debian's Python with pyzmq, for the test of a peer written in
# another language. Root runs apt-get directly; anyone else goes through sudo.
set -eu
packages="libzmq3-dev python3 python3-zmq"
missing=""
for package in $packages; do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
        missing="$missing $package"
    fi
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "Installing$missing (RunLoopKit's ZeroMQ dependency and its test peer's Python)..." >&2
$SUDO apt-get update -qq
# shellcheck disable=SC2086 # one word per package
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing >/dev/null
