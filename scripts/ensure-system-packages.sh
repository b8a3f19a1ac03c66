#!/usr/bin/env bash
# Installs the Debian packages dbrig needs when they are missing.
# As root it runs apt-get itself; otherwise it names the exact command to run.
set -euo pipefail

missing=()
for pkg in "$@"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
# Debian's python3 needs python3-venv for `python3 -m venv` (a pyenv or
# distribution-independent python already has it).
if ! python3 -c 'import ensurepip, venv' 2>/dev/null; then
  missing+=(python3-venv)
fi
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "dbrig needs these Debian packages: ${missing[*]}" >&2
  echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing Debian packages: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Package installs must not start the system MariaDB: dbrig runs its own.
policy=/usr/sbin/policy-rc.d
created_policy=0
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && created_policy=1
fi
trap '[ $created_policy -eq 1 ] && rm -f "$policy"' EXIT
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
