#!/usr/bin/env bash
# Debian packages nsync's tests and demo need: nsys (non-free nsight-systems, runs without a GPU) and
# headless Chromium. Idempotent; run as root (CI and these machines are root) or with sudo available.
set -euo pipefail
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
need=()
command -v nsys >/dev/null 2>&1 || need+=(nsight-systems)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
if [ ${#need[@]} -gt 0 ]; then
  # nsight-systems lives in non-free: enable contrib/non-free on the Debian source (deb822 or legacy list)
  if [ -f /etc/apt/sources.list.d/debian.sources ]; then
    $SUDO sed -i 's/^Components: main$/Components: main contrib non-free/' /etc/apt/sources.list.d/debian.sources
  elif [ -f /etc/apt/sources.list ]; then
    $SUDO sed -i -E '/^deb .*debian/ s/ main$/ main contrib non-free/' /etc/apt/sources.list
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need[@]}" >/dev/null
fi
# Debian's nsys looks for its importer beside its real path; without this link it leaves only a .qdstrm.
if [ -d /usr/lib/nsight-systems/host-linux-x64 ] && [ ! -e /usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64 ]; then
  $SUDO ln -sfn /usr/lib/nsight-systems/host-linux-x64 /usr/lib/x86_64-linux-gnu/nsight-systems/host-linux-x64
fi
