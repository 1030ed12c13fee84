#!/bin/sh
# Installs what RunLoopKit needs from Debian when it is missing: libzmq (headers and
# library). Root runs apt-get directly; anyone else goes through sudo.
set -eu
if dpkg-query -W -f='${Status}' libzmq3-dev 2>/dev/null | grep -q "install ok installed"; then
    exit 0
fi
if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
echo "Installing libzmq3-dev (RunLoopKit's ZeroMQ dependency)..." >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq libzmq3-dev >/dev/null
