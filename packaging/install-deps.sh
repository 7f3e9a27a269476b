#!/usr/bin/env bash
# Installs the Debian packages listed in packaging/debian-deps.txt that are not installed yet.
# Quiet and instant when everything is present (one dpkg-query, no apt call).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
mapfile -t wanted < <(grep -vE '^\s*(#|$)' "$here/debian-deps.txt" | awk '{print $1}')

missing=()
for pkg in "${wanted[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$pkg" 2>/dev/null || true)
  [ "$status" = "installed" ] || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0

echo "Installing Debian packages: ${missing[*]}" >&2
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo="sudo"
  else
    echo "error: packages missing (${missing[*]}) and not running as root; install them with:" >&2
    echo "  apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
# A fresh machine has no package lists yet: update once, then install.
if ! $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/ragwb-apt.log 2>&1; then
  $sudo apt-get update >/tmp/ragwb-apt-update.log 2>&1 || {
    echo "error: apt-get update failed; see /tmp/ragwb-apt-update.log" >&2; exit 1; }
  $sudo apt-get install -y --no-install-recommends "${missing[@]}" >/tmp/ragwb-apt.log 2>&1 || {
    echo "error: apt-get install failed; see /tmp/ragwb-apt.log" >&2; tail -5 /tmp/ragwb-apt.log >&2; exit 1; }
fi
echo "Debian packages installed." >&2
