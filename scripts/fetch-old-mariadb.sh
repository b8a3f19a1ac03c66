#!/bin/sh
# Unpack a MariaDB build that Debian offers, but that is not the installed one, into
# .servers/<version>/ so that a scenario can run it next to the installed server
# (server basedir: .servers/<version>/usr). Nothing is installed and the installed
# server is not touched: `apt-get download` fetches the .deb files, `dpkg-deb -x`
# unpacks them. Neither needs root.
#
#   scripts/fetch-old-mariadb.sh                        # the newest build older than the installed one
#   scripts/fetch-old-mariadb.sh 1:10.11.18-0+deb12u1   # an exact Debian version (apt-cache madison)
#
# DBRIG_SERVERS_DIR overrides the target folder (default: .servers in the checkout).
# Without a version it also points .servers/previous at what it unpacked, for scenarios
# that follow whichever build is the previous one.
#
# Packages: mariadb-server-core (mariadbd, mariadb-install-db, resolveip, the system
# tables' SQL and errmsg files in usr/share/mysql), mariadb-client-core
# (my_print_defaults, which mariadb-install-db --basedir looks for in <basedir>/bin) and
# mariadb-server (the plugins in usr/lib/mysql/plugin, the server's default plugin_dir
# under that basedir). Shared libraries (libpcre2, liburing, libssl ...) come from the
# host: the same Debian release's builds link against the same ones.
set -eu

PACKAGES="mariadb-server-core mariadb-client-core mariadb-server"
ROOT=$(cd "$(dirname "$0")/.." && pwd)
SERVERS=${DBRIG_SERVERS_DIR:-$ROOT/.servers}

die() {
    echo "fetch-old-mariadb: $*" >&2
    exit 2
}

for tool in apt-cache apt-get dpkg-deb; do
    command -v "$tool" >/dev/null 2>&1 || die "'$tool' not found: this script needs Debian's apt and dpkg"
done

installed=$(dpkg-query -W -f='${Version}' mariadb-server-core 2>/dev/null || true)
offered=$(apt-cache madison mariadb-server-core | awk -F'|' '{gsub(/ /, "", $2); print $2}' | awk '!seen[$0]++')
offered_line=$(printf '%s\n' "$offered" | tr '\n' ' ')

explicit=no
if [ $# -ge 1 ]; then
    version=$1
    explicit=yes
else
    # madison lists the newest first; the first one other than the installed one is
    # the previous build (the point release before the current security update).
    version=$(printf '%s\n' "$offered" | grep -v -x -F "${installed:-none}" | head -n 1 || true)
    if [ -z "$version" ]; then
        die "apt offers no mariadb-server-core other than the installed ${installed:-(none)}; \
apt-cache madison mariadb-server-core shows: ${offered_line}\
(run 'apt-get update' once, or give an exact version, e.g. from a snapshot.debian.org source)"
    fi
fi

# 1:10.11.18-0+deb12u1 -> 10.11.18
upstream=$(printf '%s' "$version" | sed -e 's/^[0-9]*://' -e 's/-.*$//')
case $upstream in
    [0-9]*.[0-9]*.[0-9]*) ;;
    *) die "'$version' is not a Debian package version such as 1:10.11.18-0+deb12u1" ;;
esac

target=$SERVERS/$upstream
if [ -x "$target/usr/sbin/mariadbd" ] && [ -f "$target/.complete" ]; then
    echo "fetch-old-mariadb: $target already holds MariaDB $upstream; nothing to do"
else
    if ! printf '%s\n' "$offered" | grep -q -x -F "$version"; then
        die "mariadb-server-core $version is not offered by the apt sources; \
apt-cache madison mariadb-server-core shows: ${offered_line}(run 'apt-get update' once?)"
    fi
    mkdir -p "$SERVERS"
    work=$(mktemp -d "$SERVERS/.fetch-$upstream.XXXXXX")
    trap 'rm -rf "$work"' EXIT INT TERM
    specs=""
    for package in $PACKAGES; do
        specs="$specs $package=$version"
    done
    # As root, apt drops to the _apt user, who cannot write to our private folder.
    sandbox_opt=""
    [ "$(id -u)" -eq 0 ] && sandbox_opt="-o APT::Sandbox::User=root"
    # apt-get download writes into the current directory.
    # shellcheck disable=SC2086
    (cd "$work" && apt-get download -q $sandbox_opt $specs) ||
        die "apt-get download of$specs failed"
    mkdir "$work/tree"
    for deb in "$work"/*.deb; do
        dpkg-deb -x "$deb" "$work/tree" || die "dpkg-deb -x $deb failed"
    done
    "$work/tree/usr/sbin/mariadbd" --version >/dev/null ||
        die "the unpacked $work/tree/usr/sbin/mariadbd does not run (missing shared libraries?)"
    printf '%s\n' "$version" >"$work/tree/.complete"
    rm -rf "$target"
    mv "$work/tree" "$target"
    rm -rf "$work"
    trap - EXIT INT TERM
    echo "fetch-old-mariadb: unpacked MariaDB $version into $target"
fi

if [ "$explicit" = no ]; then
    ln -sfn "$upstream" "$SERVERS/previous"
fi
echo "basedir: $target/usr"
